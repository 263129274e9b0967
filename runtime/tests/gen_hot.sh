#!/bin/sh
# Generate an assembly file of real, distinct functions for the runtime tests.
#   gen_hot.sh NFUNCS REPS SECTION_PREFIX SYMBOL_PREFIX > out.S
# Each function runs REPS rounds of multiply/add/rotate on its argument (about
# 15 bytes of code a round), so NFUNCS*REPS*15 bytes of code are executed by
# one call of every function. A table of pointers and a count let C call them
# all; "<prefix>kernel" is a long-running loop (for perf tests) placed in the
# middle of the range so that it lies in the remapped pages.
set -eu
n=$1 reps=$2 sec=$3 p=$4
awk -v n="$n" -v reps="$reps" -v sec="$sec" -v p="$p" 'BEGIN {
  for (i = 0; i < n; i++) {
    if (i == int(n / 2)) {
      printf "\t.section %s.%skernel,\"ax\",@progbits\n", sec, p
      printf "\t.globl %skernel\n\t.type %skernel,@function\n%skernel:\n", p, p, p
      # rdi = iterations, rsi = seed; returns a value depending on every round
      printf "\tmov %%rsi, %%rax\n1:\n\timul $0x2545F491, %%rax, %%rax\n\tadd $7, %%rax\n\trol $17, %%rax\n"
      printf "\tdec %%rdi\n\tjnz 1b\n\tret\n\t.size %skernel, .-%skernel\n", p, p
    }
    printf "\t.section %s.%sf%d,\"ax\",@progbits\n", sec, p, i
    printf "\t.globl %sf%d\n\t.type %sf%d,@function\n%sf%d:\n", p, i, p, i, p, i
    printf "\tmov %%rdi, %%rax\n\t.rept %d\n", reps
    printf "\timul $%d, %%rax, %%rax\n\tadd $%d, %%rax\n\trol $%d, %%rax\n", 2 * i + 100003, i + 1, i % 63 + 1
    printf "\t.endr\n\tret\n\t.size %sf%d, .-%sf%d\n", p, i, p, i
  }
  printf "\t.section .data.rel.ro,\"aw\"\n\t.balign 8\n\t.globl %stable\n%stable:\n", p, p
  for (i = 0; i < n; i++) printf "\t.quad %sf%d\n", p, i
  printf "\t.globl %scount\n%scount:\n\t.quad %d\n", p, p, n
  printf "\t.section .note.GNU-stack,\"\",@progbits\n"
}'
