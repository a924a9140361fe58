//! Guest launches compared pass by pass, for `gpuhost bench --guest`: one run's guest and native
//! passes, or sandboxed and trusted ones, are taken side by side in the order they ran, and the
//! ratios of the pairs are summarised as a median with its least and greatest. The pooled
//! medians (guest_vs_native.rs's tables) hide how far single passes move; these show it, and so
//! tell a drift of the machine that both sides share from a cost of one side.

use super::guest_pass::GuestPass;
use super::guest_vs_native::{BURST, Pattern, ratio};

/// The median, least and greatest of a few per-pass ratios.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Spread {
    /// The median (the mean of the middle two for an even count).
    pub median: f64,
    /// The least.
    pub min: f64,
    /// The greatest.
    pub max: f64,
}

impl Spread {
    fn of(mut v: Vec<f64>) -> Spread {
        v.sort_unstable_by(f64::total_cmp);
        let n = v.len();
        let median = match n {
            0 => 0.0,
            n if n % 2 == 1 => v[n / 2],
            n => (v[n / 2 - 1] + v[n / 2]) / 2.0,
        };
        Spread {
            median,
            min: v.first().copied().unwrap_or(0.0),
            max: v.last().copied().unwrap_or(0.0),
        }
    }

    /// A table cell: `1.10× (1.05–1.20)`.
    fn cell(&self) -> String {
        format!("{:.2}× ({:.2}–{:.2})", self.median, self.min, self.max)
    }

    fn json(&self) -> String {
        format!(
            "{{\"median\":{:.3},\"min\":{:.3},\"max\":{:.3}}}",
            self.median, self.min, self.max
        )
    }
}

/// Guest over native per pair of passes (a trusted pass and the native pass just before it),
/// for each guest path: [argument list, bound, bound by its own enqueue].
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Paired {
    /// Pairs compared.
    pub pairs: usize,
    /// A lone launch, each side less its own clock read pair.
    pub alone_net: [Spread; 3],
    /// A launch within a burst.
    pub burst: [Spread; 3],
}

impl Paired {
    /// `trusted[i]` against `beside[i]` (native's pattern medians and clock pair).
    pub(super) fn of(trusted: &[GuestPass], beside: &[(Pattern, u128)]) -> Paired {
        let pairs = || trusted.iter().zip(beside);
        let spread = |f: &dyn Fn(&GuestPass, &(Pattern, u128)) -> f64| {
            Spread::of(pairs().map(|(g, n)| f(g, n)).collect())
        };
        let path = |p: &GuestPass, i: usize| [p.launch, p.bound, p.held][i];
        let alone_net = [0, 1, 2].map(|i| {
            spread(&|g, (n, clock)| {
                ratio(
                    path(g, i).alone.saturating_sub(g.clock_ns),
                    n.alone.saturating_sub(*clock),
                )
            })
        });
        let burst = [0, 1, 2].map(|i| spread(&|g, (n, _)| ratio(path(g, i).burst, n.burst)));
        Paired {
            pairs: pairs().count(),
            alone_net,
            burst,
        }
    }

    pub(super) fn markdown(&self, names: [&str; 3]) -> String {
        let mut s = format!(
            "Each trusted pass against the native pass run just before it ({} pairs), guest / native: median (least–greatest):\n\n| path | alone, each side less its clock read pair | in bursts of {BURST} |\n|---|---|---|\n",
            self.pairs
        );
        for (i, name) in names.iter().enumerate() {
            s += &format!(
                "| {name} | {} | {} |\n",
                self.alone_net[i].cell(),
                self.burst[i].cell()
            );
        }
        s
    }

    pub(super) fn json(&self) -> String {
        let three = |x: &[Spread; 3]| {
            format!(
                "{{\"launch\":{},\"bound\":{},\"held\":{}}}",
                x[0].json(),
                x[1].json(),
                x[2].json()
            )
        };
        format!(
            "{{\"pairs\":{},\"alone_net\":{},\"burst\":{}}}",
            self.pairs,
            three(&self.alone_net),
            three(&self.burst)
        )
    }
}

/// Sandboxed over trusted per pair of adjacent passes (the bench runs them T S S T T S S T, so
/// the i-th of each kind ran next to each other).
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct SandboxPaired {
    /// Pairs compared.
    pub pairs: usize,
    /// A lone launch with an argument list, each pass less its clock read pair.
    pub alone_net: Spread,
    /// An argument-list launch within a burst.
    pub burst: Spread,
    /// A bound launch within a burst.
    pub bound_burst: Spread,
}

impl SandboxPaired {
    /// `sandboxed[i]` against `trusted[i]`.
    pub(super) fn of(trusted: &[GuestPass], sandboxed: &[GuestPass]) -> SandboxPaired {
        let pairs = || trusted.iter().zip(sandboxed);
        let spread = |f: &dyn Fn(&GuestPass, &GuestPass) -> f64| {
            Spread::of(pairs().map(|(t, s)| f(t, s)).collect())
        };
        SandboxPaired {
            pairs: pairs().count(),
            alone_net: spread(&|t, s| {
                ratio(
                    s.launch.alone.saturating_sub(s.clock_ns),
                    t.launch.alone.saturating_sub(t.clock_ns),
                )
            }),
            burst: spread(&|t, s| ratio(s.launch.burst, t.launch.burst)),
            bound_burst: spread(&|t, s| ratio(s.bound.burst, t.bound.burst)),
        }
    }

    pub(super) fn markdown(&self) -> String {
        format!(
            "Each sandboxed pass against the trusted pass beside it ({} pairs), sandboxed / trusted: median (least–greatest):\n\n| launch alone, less its clock read pair | launch, in bursts of {BURST} | bound launch, in bursts of {BURST} |\n|---|---|---|\n| {} | {} | {} |\n",
            self.pairs,
            self.alone_net.cell(),
            self.burst.cell(),
            self.bound_burst.cell()
        )
    }

    pub(super) fn json(&self) -> String {
        format!(
            "{{\"pairs\":{},\"alone_net\":{},\"burst\":{},\"bound_burst\":{}}}",
            self.pairs,
            self.alone_net.json(),
            self.burst.json(),
            self.bound_burst.json()
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_spread_gives_the_middle_two_mean_for_an_even_count() {
        let s = Spread::of(vec![1.3, 1.0, 1.2, 1.1]);
        assert_eq!((s.min, s.max), (1.0, 1.3));
        assert!((s.median - 1.15).abs() < 1e-9);
    }
}
