//! Writing the text format in its canonical form (see the module above for the format).

use std::io::{self, Write};

use super::{block_edges, blocks, escaped, FuncId, Graph, MAGIC, MAGIC_V2, MAGIC_V4, MAGIC_V5};

impl Graph {
    /// Writes the canonical text: functions sorted by name, calls by (caller, callee) name,
    /// each call's sites after it by offset.
    pub fn write(&self, mut out: impl Write) -> io::Result<()> {
        let plain = |n: &str| matches!(escaped(n), std::borrow::Cow::Borrowed(_));
        let needs_escapes = self
            .funcs
            .iter()
            .any(|f| !plain(&f.name) || f.aliases.iter().any(|a| !plain(a)));
        let magic = match (
            self.block_edges.is_empty(),
            self.blocks.is_empty(),
            needs_escapes,
        ) {
            (false, _, _) => MAGIC_V5,
            (true, false, _) => MAGIC_V4,
            (true, true, true) => MAGIC,
            (true, true, false) => MAGIC_V2,
        };
        writeln!(out, "{magic}")?;
        for (k, v) in &self.headers {
            writeln!(out, "# {k}: {v}")?;
        }
        let mut by_name: Vec<FuncId> = (0..self.funcs.len()).map(FuncId::from_index).collect();
        by_name
            .sort_unstable_by(|&a, &b| self.funcs[a.index()].name.cmp(&self.funcs[b.index()].name));
        for &id in &by_name {
            let f = &self.funcs[id.index()];
            writeln!(out, "fn {} {} {}", escaped(&f.name), f.size, f.samples)?;
        }
        for &id in &by_name {
            let f = &self.funcs[id.index()];
            let mut aliases: Vec<&String> = f.aliases.iter().collect();
            aliases.sort_unstable();
            for a in aliases {
                writeln!(out, "alias {} {}", escaped(&f.name), escaped(a))?;
            }
        }
        // Rank by name so calls sort without comparing strings millions of times.
        let mut rank = vec![0u32; self.funcs.len()];
        for (r, &id) in by_name.iter().enumerate() {
            rank[id.index()] = r as u32;
        }
        let by_rank = |caller: FuncId, callee: FuncId| (rank[caller.index()], rank[callee.index()]);
        let mut calls = self.calls.clone();
        calls.sort_unstable_by_key(|c| by_rank(c.caller, c.callee));
        let mut sites = self.sites.clone();
        sites.sort_unstable_by_key(|s| (by_rank(s.caller, s.callee), s.offset));
        let mut sites = sites.iter().peekable();
        for c in &calls {
            let (a, b) = (
                escaped(&self.funcs[c.caller.index()].name),
                escaped(&self.funcs[c.callee.index()].name),
            );
            writeln!(out, "call {a} {b} {}", c.weight)?;
            // Sites of pairs sorted before this one have no call line: the reader would reject
            // them, so they are not written.
            while let Some(s) =
                sites.next_if(|s| by_rank(s.caller, s.callee) <= by_rank(c.caller, c.callee))
            {
                if (s.caller, s.callee) == (c.caller, c.callee) {
                    writeln!(out, "site {a} {b} {} {}", s.offset, s.weight)?;
                }
            }
        }
        blocks::write_lines(self, &rank, &mut out)?;
        block_edges::write_lines(self, &rank, &mut out)?;
        out.flush()
    }
}
