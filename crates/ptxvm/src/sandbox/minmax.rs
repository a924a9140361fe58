//! The first and last branch landing in a range of positions, as a segment tree: bounded.rs
//! asks it whether a loop is entered only at its header, once per back-edge, in O(log n) rather
//! than a walk over every branch of the body.

/// The first and last branch position landing at each position of a body, as a segment tree:
/// the first and last over a range of targets in O(log n).
#[derive(Default)]
pub(super) struct MinMaxTree {
    /// Leaves at `n..2n`, each inner node the (min, max) of its two children; `EMPTY` where no
    /// branch lands.
    nodes: Vec<(usize, usize)>,
    n: usize,
}

const EMPTY: (usize, usize) = (usize::MAX, 0);

fn merge(a: (usize, usize), b: (usize, usize)) -> (usize, usize) {
    (a.0.min(b.0), a.1.max(b.1))
}

impl MinMaxTree {
    pub(super) fn new(n: usize) -> Self {
        MinMaxTree {
            nodes: vec![EMPTY; 2 * n],
            n,
        }
    }

    /// A branch at `source` lands at `target` (ignored past the body: no position is there).
    pub(super) fn note(&mut self, target: usize, source: usize) {
        if target < self.n {
            let leaf = &mut self.nodes[self.n + target];
            *leaf = merge(*leaf, (source, source));
        }
    }

    /// Fills the inner nodes, once every branch is noted.
    pub(super) fn build(&mut self) {
        for i in (1..self.n).rev() {
            self.nodes[i] = merge(self.nodes[2 * i], self.nodes[2 * i + 1]);
        }
    }

    /// The first and last branch landing in `lo..hi`, if any does.
    pub(super) fn range(&self, lo: usize, hi: usize) -> Option<(usize, usize)> {
        let (mut lo, mut hi) = (lo.min(self.n) + self.n, hi.min(self.n) + self.n);
        let mut acc = EMPTY;
        while lo < hi {
            if lo & 1 == 1 {
                acc = merge(acc, self.nodes[lo]);
                lo += 1;
            }
            if hi & 1 == 1 {
                hi -= 1;
                acc = merge(acc, self.nodes[hi]);
            }
            lo /= 2;
            hi /= 2;
        }
        (acc != EMPTY).then_some(acc)
    }
}

#[cfg(test)]
mod tests {
    use super::MinMaxTree;

    #[test]
    fn the_tree_gives_the_first_and_last_source_over_any_range_as_a_walk_would() {
        // Deterministic pseudo-random branches over bodies of several sizes (odd ones too: the
        // tree is not padded to a power of two).
        let mut x = 0x9e37_79b9u64;
        let mut next = |m: usize| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x % m as u64) as usize
        };
        for n in [1usize, 2, 3, 7, 64, 101] {
            let edges: Vec<(usize, usize)> = (0..n).map(|_| (next(n + 2), next(n))).collect();
            let mut t = MinMaxTree::new(n);
            for &(target, source) in &edges {
                t.note(target, source);
            }
            t.build();
            for lo in 0..=n + 1 {
                for hi in lo..=n + 2 {
                    let walk = edges
                        .iter()
                        .filter(|&&(target, _)| target >= lo && target < hi && target < n)
                        .map(|&(_, s)| (s, s))
                        .reduce(|a, b| (a.0.min(b.0), a.1.max(b.1)));
                    assert_eq!(t.range(lo, hi), walk, "n {n}, {lo}..{hi}");
                }
            }
        }
    }
}
