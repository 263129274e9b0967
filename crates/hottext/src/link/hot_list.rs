//! Which functions of an order reach the linker input. `order` and `fetch` both come through
//! here, so a function is left out for the same reasons in both.
//!
//! Left out, in this order of precedence:
//! - parts GCC split off as unlikely (`foo.cold`, see [`is_split_cold_part`]);
//! - start-up code of the C runtime, which no linker input can move
//!   ([`is_c_runtime_startup`]);
//! - names the format cannot carry safely ([`check_entries`]): refused as an error, or left out
//!   where a build must go on ([`UnsafeNames`]).
//!
//! A function that GCC split a `.cold` part off keeps that part's section out of its list
//! ([`Entry::unlikely_is_whole`]): the graph's functions and, when given, the binary's tell
//! which functions have one. Without the binary, a part no sample hit is unknown and its
//! section comes along into the hot range, which `verify --binary --planned` then names.
//!
//! Functions a binary lacks never get here: with a binary the graph is first rematched to it
//! (`graph::fit`), which keeps only what the binary has, under the binary's names.

use serde::Serialize;

use super::format::Names;
use super::{
    check_entries, is_c_runtime_startup, is_split_cold_part, split_cold_parent, EmitError, Entry,
};
use crate::binary::{symbol_of, Binary};
use crate::graph::{FuncId, Graph};
use crate::prefetch::{prefetch, DISTANCE as PREFETCH_DISTANCE};

/// What a hot range holds, counted one way wherever hottext reports it (`order`, `fetch`,
/// `verify --binary` and their JSON). A **hot function** is one placed in the hot range: every
/// function the linker input lists, whether it has samples of its own or only calls code that
/// has (its call instructions run as often as their callees). Its **hot bytes** are its own
/// size; the padding between functions is not code, and the range's size shows it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
pub struct HotText {
    /// Hot functions: those the linker input lists.
    pub functions: u64,
    /// Their bytes, by their sizes (saturating).
    pub bytes: u64,
}

impl HotText {
    /// The figures of functions of these sizes.
    pub(crate) fn of_sizes(sizes: impl IntoIterator<Item = u64>) -> HotText {
        sizes
            .into_iter()
            .fold(HotText::default(), |t, size| HotText {
                functions: t.functions + 1,
                // A profile may claim any size: saturate rather than wrap.
                bytes: t.bytes.saturating_add(size),
            })
    }
}

/// What to do with a name the linker input cannot carry safely.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UnsafeNames {
    /// Fail, naming it: `order`, where a person reads the error and the profile is theirs.
    Refuse,
    /// Leave the function where the compiler put it: `fetch`, where the build must go on and
    /// the names are the binary's own.
    LeaveOut,
}

/// The linker input's functions, and those left out.
#[derive(Debug)]
pub struct HotList<'g> {
    /// What the linker input lists, in order.
    pub entries: Vec<Entry<'g>>,
    /// The graph's ids of `entries`, in the same order.
    pub kept: Vec<FuncId>,
    /// Parts GCC split off as unlikely.
    pub split_cold: Vec<&'g str>,
    /// Start-up code of the C runtime.
    pub startup: Vec<&'g str>,
    /// Names the format cannot carry safely (only with [`UnsafeNames::LeaveOut`]).
    pub unsafe_names: Vec<&'g str>,
}

impl HotList<'_> {
    /// The hot range this list asks the linker for, by the sizes in `graph`.
    pub fn hot_text(&self, graph: &Graph) -> HotText {
        HotText::of_sizes(self.kept.iter().map(|&f| graph.funcs()[f].size))
    }
}

/// The functions of `order` that a format taking `names` will list; `binary`, the one the graph was fitted
/// to, tells which functions have a part split off.
pub(crate) fn hot_list<'g>(
    graph: &'g Graph,
    order: &[FuncId],
    names: Names,
    unsafe_names: UnsafeNames,
    binary: Option<&Binary>,
) -> Result<HotList<'g>, EmitError> {
    let split = split_parents(graph, binary);
    let mut list = HotList {
        entries: Vec::with_capacity(order.len()),
        kept: Vec::with_capacity(order.len()),
        split_cold: Vec::new(),
        startup: Vec::new(),
        unsafe_names: Vec::new(),
    };
    let funcs = graph.funcs();
    for (i, &f) in order.iter().enumerate() {
        // An order visits the functions at random, and each name is a read after the read of
        // its function: started two steps ahead, both overlap (a third of the write on 1 M).
        if let Some(&ahead) = order.get(i + 2 * PREFETCH_DISTANCE) {
            prefetch(&funcs[ahead]);
        }
        if let Some(first_byte) = order
            .get(i + PREFETCH_DISTANCE)
            .and_then(|&ahead| funcs[ahead].name.as_bytes().first())
        {
            prefetch(first_byte);
        }
        let func = &funcs[f];
        if is_split_cold_part(&func.name) {
            list.split_cold.push(&func.name);
            continue;
        }
        if is_c_runtime_startup(&func.name) {
            list.startup.push(&func.name);
            continue;
        }
        let mut entry = Entry::from(func);
        entry.unlikely_is_whole = !split.contains(symbol_of(&func.name));
        if let Err(e) = check_entries(names, std::slice::from_ref(&entry)) {
            match unsafe_names {
                UnsafeNames::Refuse => return Err(e),
                UnsafeNames::LeaveOut => {
                    list.unsafe_names.push(&func.name);
                    continue;
                }
            }
        }
        list.entries.push(entry);
        list.kept.push(f);
    }
    Ok(list)
}

/// The symbols of the functions a part was split off (`f` for `f.cold`, `f.cold.2`), among
/// the graph's functions and the binary's.
fn split_parents<'a>(graph: &'a Graph, binary: Option<&'a Binary>) -> foldhash::HashSet<&'a str> {
    let graph_names = graph.funcs().iter().map(|f| f.name.as_str());
    let binary_names = binary
        .into_iter()
        .flat_map(|b| b.functions.iter())
        .flat_map(|f| std::iter::once(&f.name).chain(&f.aliases))
        .map(String::as_str);
    graph_names
        .chain(binary_names)
        .filter_map(split_cold_parent)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::graph::{ids, GraphBuilder};

    fn graph(names: &[&str]) -> Graph {
        let mut b = GraphBuilder::default();
        for name in names {
            let id = b.func(name, 16);
            b.add_samples(id, 1);
        }
        b.finish()
    }

    #[test]
    fn split_cold_parts_stay_out_in_order_of_the_rest() {
        let g = graph(&["main", "f.cold", "g", "h.cold.2"]);
        let list = hot_list(
            &g,
            &ids([2, 1, 0, 3]),
            Names::Symbols,
            UnsafeNames::Refuse,
            None,
        )
        .unwrap();
        assert_eq!(list.kept, ids([2, 0]));
        let names: Vec<&str> = list.entries.iter().map(|e| e.name).collect();
        assert_eq!(names, ["g", "main"]);
        assert_eq!(list.split_cold, ["f.cold", "h.cold.2"]);
        let hot = list.hot_text(&g);
        assert_eq!((hot.functions, hot.bytes), (2, 32));
    }

    #[test]
    fn the_c_runtimes_start_up_code_stays_out() {
        let g = graph(&["_start", "main", "frame_dummy;crtstuff.c", "start"]);
        let list = hot_list(
            &g,
            &ids([0, 1, 2, 3]),
            Names::Symbols,
            UnsafeNames::Refuse,
            None,
        )
        .unwrap();
        assert_eq!(list.kept, ids([1, 3]));
        assert_eq!(list.startup, ["_start", "frame_dummy;crtstuff.c"]);
    }

    #[test]
    fn an_unsafe_name_is_refused_or_left_out_as_asked() {
        let g = graph(&["main", "x)}evil", "g"]);
        let err = hot_list(
            &g,
            &ids([0, 1, 2]),
            Names::Symbols,
            UnsafeNames::Refuse,
            None,
        )
        .unwrap_err();
        assert_eq!(err.name(), Some("x)}evil"));
        let list = hot_list(
            &g,
            &ids([0, 1, 2]),
            Names::Symbols,
            UnsafeNames::LeaveOut,
            None,
        )
        .unwrap();
        assert_eq!(list.kept, ids([0, 2]));
        assert_eq!(list.unsafe_names, ["x)}evil"]);
        // A plain list takes any name without whitespace or control characters.
        let list = hot_list(&g, &ids([0, 1, 2]), Names::Any, UnsafeNames::Refuse, None).unwrap();
        assert_eq!(list.kept, ids([0, 1, 2]));
    }

    #[test]
    fn a_function_with_a_split_part_keeps_its_unlikely_section_out() {
        let g = graph(&["f", "f.cold", "rare", "g"]);
        let list = hot_list(
            &g,
            &ids([0, 2, 3]),
            Names::Symbols,
            UnsafeNames::Refuse,
            None,
        )
        .unwrap();
        let whole: Vec<(&str, bool)> = list
            .entries
            .iter()
            .map(|e| (e.name, e.unlikely_is_whole))
            .collect();
        assert_eq!(whole, [("f", false), ("rare", true), ("g", true)]);
    }
}
