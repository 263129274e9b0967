#!/usr/bin/env python3
"""bench/profile/real_calls.py BINARY PROFILE: how much of a profile's call weight is on calls
that exist in the binary's code.

An edge `call A B W` is real when A holds a direct `call <B>` (objdump -d), or when A calls
through a pointer (`call *...`) at all: the code does not say where those go. Prints the shares
of the weight on direct calls, on callers with calls through pointers, and on neither (edges that
skip a level, or wrong ones), and the ten heaviest of the latter.
"""
import re
import subprocess
import sys


def calls_in(binary):
    """(direct callees by function, functions with calls through a pointer)."""
    text = subprocess.run(["objdump", "-d", "--no-show-raw-insn", binary],
                          capture_output=True, text=True, check=True).stdout
    direct, indirect, func = {}, set(), None
    for line in text.splitlines():
        m = re.match(r"^[0-9a-f]+ <(.+)>:$", line)
        if m:
            func = m.group(1)
            continue
        m = re.search(r"\tcall\s+(\S+)(?: <(.+)>)?$", line)
        if m and func:
            if m.group(1).startswith("*"):
                indirect.add(func)
            elif m.group(2):
                direct.setdefault(func, set()).add(m.group(2))
    return direct, indirect


def main():
    binary, profile = sys.argv[1], sys.argv[2]
    direct, indirect = calls_in(binary)
    weight = {"direct": 0, "through a pointer": 0, "not in the code": 0}
    wrong = []
    for line in open(profile):
        if not line.startswith("call "):
            continue
        _, caller, callee, w = line.split()
        w = int(w)
        # Qualified local names (`name;file`) are plain names in objdump.
        plain = caller.split(";")[0], callee.split(";")[0]
        if plain[1] in direct.get(plain[0], ()):
            weight["direct"] += w
        elif plain[0] in indirect:
            weight["through a pointer"] += w
        else:
            weight["not in the code"] += w
            wrong.append((w, caller, callee))
    total = sum(weight.values()) or 1
    print(f"call weight {total}: " + ", ".join(
        f"{k} {100 * v / total:.2f}%" for k, v in weight.items()))
    for w, caller, callee in sorted(wrong, reverse=True)[:10]:
        print(f"  not in the code: {caller} -> {callee} ({w})")


if __name__ == "__main__":
    main()
