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

/// Two bar groups on a log scale: init and warm latency per implementation,
/// with the raw UpdateItem latency as a reference line on the warm panel.
pub fn chart(rows: &[(&str, f64, f64)], raw_update_item_ms: f64) -> String {
    let (width, bar_h, gap, left, top) = (900.0, 26.0, 10.0, 230.0, 60.0);
    let panel_w = (width - left - 40.0) / 2.0;
    let height = top + rows.len() as f64 * (bar_h + gap) + 70.0;
    let max = rows
        .iter()
        .flat_map(|r| [r.1, r.2])
        .fold(raw_update_item_ms, f64::max)
        .max(1.0);
    let min = 0.01_f64;
    let scale = |v: f64| ((v.max(min) / min).log10() / (max * 1.5 / min).log10()) * panel_w;
    let colors = ["#d9480f", "#1c7ed6", "#5f3dc4"];
    let mut svg = format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{width}\" height=\"{height}\" font-family=\"sans-serif\" font-size=\"13\">\n\
         <rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n\
         <text x=\"{left}\" y=\"24\" font-size=\"16\" font-weight=\"bold\">Init and warm latency (median, log scale)</text>\n\
         <text x=\"{left}\" y=\"48\">init: spawn to first GET /next</text>\n\
         <text x=\"{}\" y=\"48\">warm: event handed out to response posted</text>\n",
        left + panel_w + 20.0
    );
    for (i, (name, init, warm)) in rows.iter().enumerate() {
        let y = top + i as f64 * (bar_h + gap);
        let color = colors[i % colors.len()];
        svg.push_str(&format!(
            "<text x=\"{}\" y=\"{}\" text-anchor=\"end\">{}</text>\n",
            left - 8.0,
            y + 18.0,
            name
        ));
        for (panel, value) in [(0.0, *init), (panel_w + 20.0, *warm)] {
            let w = scale(value);
            svg.push_str(&format!(
                "<rect x=\"{}\" y=\"{y}\" width=\"{w:.1}\" height=\"{bar_h}\" fill=\"{color}\"/>\n\
                 <text x=\"{}\" y=\"{}\">{value:.2} ms</text>\n",
                left + panel,
                left + panel + w + 4.0,
                y + 18.0
            ));
        }
    }
    let x = left + panel_w + 20.0 + scale(raw_update_item_ms);
    let bottom = top + rows.len() as f64 * (bar_h + gap);
    svg.push_str(&format!(
        "<line x1=\"{x:.1}\" y1=\"{}\" x2=\"{x:.1}\" y2=\"{bottom}\" stroke=\"black\" stroke-dasharray=\"4 3\"/>\n\
         <text x=\"{x:.1}\" y=\"{}\" text-anchor=\"middle\">raw UpdateItem {raw_update_item_ms:.2} ms</text>\n</svg>\n",
        top - 4.0,
        bottom + 18.0
    ));
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
