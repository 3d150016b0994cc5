//! The median the benches report (the mean of the middle two for an even
//! count), shared by the bench binaries that include it with `#[path]`.

/// The median of `values` (NaN sorts last).
pub fn median(values: &[f64]) -> f64 {
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    let n = sorted.len();
    if n % 2 == 1 {
        sorted[n / 2]
    } else {
        (sorted[n / 2 - 1] + sorted[n / 2]) / 2.0
    }
}
