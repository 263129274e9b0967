//! Immediate dominators of a small directed graph (a function's blocks): the iterative
//! algorithm of Cooper, Harvey and Kennedy ("A Simple, Fast Dominance Algorithm", 2001),
//! which on graphs of a function's size beats the asymptotically faster ones.

/// Each node's immediate dominator from `root` (`succs[n]`: the nodes `n` leads to); the root's
/// is itself, and a node the root does not reach has none.
pub(super) fn immediate(succs: &[Vec<usize>], root: usize) -> Vec<Option<usize>> {
    let n = succs.len();
    let order = reverse_postorder(succs, root);
    // Each reached node's place in `order`: the intersection walks up by it.
    let mut rank = vec![usize::MAX; n];
    for (i, &node) in order.iter().enumerate() {
        rank[node] = i;
    }
    let mut preds = vec![Vec::new(); n];
    for (from, to) in succs.iter().enumerate() {
        for &t in to {
            preds[t].push(from);
        }
    }
    let mut idom: Vec<Option<usize>> = vec![None; n];
    idom[root] = Some(root);
    let mut changed = true;
    while changed {
        changed = false;
        for &node in order.iter().skip(1) {
            let mut new = None;
            for &p in &preds[node] {
                if idom[p].is_none() {
                    continue;
                }
                new = Some(match new {
                    None => p,
                    Some(other) => intersect(&idom, &rank, p, other),
                });
            }
            if new.is_some() && idom[node] != new {
                idom[node] = new;
                changed = true;
            }
        }
    }
    idom
}

/// The nearest common dominator of `a` and `b`, both reached.
fn intersect(idom: &[Option<usize>], rank: &[usize], mut a: usize, mut b: usize) -> usize {
    while a != b {
        while rank[a] > rank[b] {
            a = idom[a].expect("a reached node has a dominator once processed");
        }
        while rank[b] > rank[a] {
            b = idom[b].expect("a reached node has a dominator once processed");
        }
    }
    a
}

/// The nodes `root` reaches, in reverse postorder (without recursion: a function may have
/// thousands of blocks).
fn reverse_postorder(succs: &[Vec<usize>], root: usize) -> Vec<usize> {
    let mut seen = vec![false; succs.len()];
    let mut post = Vec::with_capacity(succs.len());
    let mut stack = vec![(root, 0usize)];
    seen[root] = true;
    while let Some((node, next)) = stack.last_mut() {
        if let Some(&s) = succs[*node].get(*next) {
            *next += 1;
            if !seen[s] {
                seen[s] = true;
                stack.push((s, 0));
            }
        } else {
            post.push(*node);
            stack.pop();
        }
    }
    post.reverse();
    post
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_diamond_and_a_loop_have_the_dominators_of_their_shape() {
        // 0 -> 1, 2; 1 -> 3; 2 -> 3; 3 -> 4 -> 3 (loop), 4 -> 5; 6 unreached.
        let succs = vec![
            vec![1, 2],
            vec![3],
            vec![3],
            vec![4],
            vec![3, 5],
            vec![],
            vec![5],
        ];
        let idom = immediate(&succs, 0);
        assert_eq!(
            idom,
            [Some(0), Some(0), Some(0), Some(0), Some(3), Some(4), None]
        );
    }
}
