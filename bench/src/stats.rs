//! Medians, 90th percentiles, and the chart.

/// Median and 90th percentile of a sample.
#[derive(Debug, Clone, Copy)]
pub struct Summary {
    /// 50th percentile.
    pub median: f64,
    /// 90th percentile (nearest rank).
    pub p90: f64,
}

impl Summary {
    /// Summarises `values` (NaN if empty).
    pub fn of(values: &[f64]) -> Self {
        let mut sorted: Vec<f64> = values.iter().copied().filter(|v| !v.is_nan()).collect();
        sorted.sort_by(f64::total_cmp);
        let rank = |q: f64| {
            if sorted.is_empty() {
                return f64::NAN;
            }
            let index = ((q * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len()) - 1;
            sorted[index]
        };
        Self {
            median: rank(0.5),
            p90: rank(0.9),
        }
    }
}

/// Two bar groups on a log scale, one row per implementation: the cold
/// request (init and first invocation, stacked) and the warm latency, at
/// 128 MB with init unthrottled.
pub fn chart(rows: &[(&str, f64, f64, f64)]) -> String {
    let (width, bar_h, gap, left, top) = (1000.0, 26.0, 10.0, 260.0, 64.0);
    let panel_w = (width - left - 60.0) / 2.0;
    let height = top + rows.len() as f64 * (bar_h + gap) + 40.0;
    let max = rows.iter().flat_map(|r| [r.1 + r.2, r.3]).fold(1.0, f64::max);
    let min = 0.1_f64;
    let scale = |v: f64| ((v.max(min) / min).log10() / (max * 3.0 / min).log10()) * panel_w;
    let colors = ["#d9480f", "#1c7ed6", "#5f3dc4", "#2b8a3e", "#868e96"];
    let mut svg = format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{width}\" height=\"{height}\" font-family=\"sans-serif\" font-size=\"13\">\n\
         <rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n\
         <text x=\"{left}\" y=\"22\" font-size=\"16\" font-weight=\"bold\">128 MB, DynamoDB over TLS, init unthrottled (median, log scale)</text>\n\
         <text x=\"{left}\" y=\"48\">cold request: init (dark) + first invocation (light)</text>\n\
         <text x=\"{}\" y=\"48\">warm invocation</text>\n",
        left + panel_w + 30.0
    );
    for (i, (name, init, first, warm)) in rows.iter().enumerate() {
        let y = top + i as f64 * (bar_h + gap);
        let color = colors[i % colors.len()];
        svg.push_str(&format!(
            "<text x=\"{}\" y=\"{}\" text-anchor=\"end\">{name}</text>\n",
            left - 8.0,
            y + 18.0
        ));
        let (cold_w, init_w) = (scale(init + first), scale(*init).min(scale(init + first)));
        svg.push_str(&format!(
            "<rect x=\"{left}\" y=\"{y}\" width=\"{cold_w:.1}\" height=\"{bar_h}\" fill=\"{color}\" fill-opacity=\"0.45\"/>\n\
             <rect x=\"{left}\" y=\"{y}\" width=\"{init_w:.1}\" height=\"{bar_h}\" fill=\"{color}\"/>\n\
             <text x=\"{}\" y=\"{}\">{:.1} ms ({init:.1} + {first:.1})</text>\n",
            left + cold_w + 4.0,
            y + 18.0,
            init + first
        ));
        let x = left + panel_w + 30.0;
        let warm_w = scale(*warm);
        svg.push_str(&format!(
            "<rect x=\"{x}\" y=\"{y}\" width=\"{warm_w:.1}\" height=\"{bar_h}\" fill=\"{color}\"/>\n\
             <text x=\"{}\" y=\"{}\">{warm:.2} ms</text>\n",
            x + warm_w + 4.0,
            y + 18.0
        ));
    }
    svg.push_str("</svg>\n");
    svg
}

#[cfg(test)]
mod tests {
    use super::Summary;

    #[test]
    fn nearest_rank_percentiles() {
        let values: Vec<f64> = (1..=10).map(f64::from).collect();
        let summary = Summary::of(&values);
        assert_eq!((summary.median, summary.p90), (5.0, 9.0));
        assert!(Summary::of(&[]).median.is_nan());
    }
}
