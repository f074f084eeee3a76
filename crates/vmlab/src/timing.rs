//! Wall-clock timing of operation batches and median aggregation.
//!
//! Timing single operations would measure the clock more than the tree
//! (`Instant::now` costs tens of nanoseconds), so callers time whole
//! batches and divide. Repetitions are summarised by their median because
//! it ignores the occasional sample disturbed by the OS or another process.

use std::time::{Duration, Instant};

/// Wall time spent on a batch of `ops` operations.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Batch {
    /// Time the batch took.
    pub elapsed: Duration,
    /// Operations (or entries) the batch processed.
    pub ops: u64,
}

impl Batch {
    /// Nanoseconds per operation; zero for an empty batch rather than NaN,
    /// so a degenerate sample can never poison the JSON output.
    pub fn ns_per_op(&self) -> f64 {
        if self.ops == 0 {
            return 0.0;
        }
        self.elapsed.as_nanos() as f64 / self.ops as f64
    }
}

/// Runs `f` once and returns how long it took alongside its result.
pub fn timed<R>(f: impl FnOnce() -> R) -> (Duration, R) {
    let start = Instant::now();
    let result = f();
    (start.elapsed(), result)
}

/// Collects `repeat` samples and returns the median nanoseconds per op.
///
/// Stops at the first error, because a failed sample usually means the
/// structure under test returned wrong results and the timing is moot.
pub fn median_ns_per_op<E>(
    repeat: usize,
    mut sample: impl FnMut() -> Result<Batch, E>,
) -> Result<f64, E> {
    let mut values = Vec::with_capacity(repeat);
    for _ in 0..repeat {
        values.push(sample()?.ns_per_op());
    }
    Ok(median(&mut values))
}

/// Median of `values` (mean of the middle two for an even count; 0 when
/// empty). Reorders `values`.
pub fn median(values: &mut [f64]) -> f64 {
    if values.is_empty() {
        return 0.0;
    }
    values.sort_by(f64::total_cmp);
    let mid = values.len() / 2;
    if values.len() % 2 == 1 {
        values[mid]
    } else {
        (values[mid - 1] + values[mid]) / 2.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn median_of_odd_and_even() {
        assert_eq!(median(&mut [3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(&mut [4.0, 1.0, 3.0, 2.0]), 2.5);
        assert_eq!(median(&mut []), 0.0);
    }

    #[test]
    fn median_ns_per_op_uses_each_sample() {
        let mut next = [10u64, 30, 20].into_iter();
        let result: Result<f64, ()> = median_ns_per_op(3, || {
            Ok(Batch {
                elapsed: Duration::from_nanos(next.next().unwrap() * 100),
                ops: 100,
            })
        });
        assert_eq!(result, Ok(20.0));
    }

    #[test]
    fn empty_sample_is_zero() {
        assert_eq!(
            Batch {
                elapsed: Duration::from_secs(1),
                ops: 0
            }
            .ns_per_op(),
            0.0
        );
    }
}
