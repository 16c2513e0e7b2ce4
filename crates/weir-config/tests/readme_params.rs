//! `config/README.md`'s algorithm table lists exactly the parameters of the one table in
//! `weir_config::params`: the same algorithms in the same order, the same parameter names
//! in the same order, and "optional" on exactly the optional ones.

use weir_config::params::ALGORITHMS;

/// The backticked words of `text`, in order.
fn ticked(text: &str) -> Vec<&str> {
    text.split('`').skip(1).step_by(2).collect()
}

#[test]
fn readme_table_lists_exactly_the_parameter_table() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../config/README.md");
    let readme = std::fs::read_to_string(path).unwrap();
    let rows: Vec<(&str, &str)> = readme
        .lines()
        .skip_while(|line| !line.starts_with("| `algorithm`"))
        .skip(2)
        .take_while(|line| line.starts_with('|'))
        .map(|line| {
            let cells: Vec<&str> = line.split('|').map(str::trim).collect();
            (cells[1], cells[2])
        })
        .collect();
    let names: Vec<&str> = rows.iter().map(|(a, _)| a.trim_matches('`')).collect();
    let want: Vec<&str> = ALGORITHMS.iter().map(|a| a.name).collect();
    assert_eq!(names, want, "the README's algorithms");
    for ((_, params), algorithm) in rows.iter().zip(ALGORITHMS) {
        let listed = ticked(params);
        let want: Vec<&str> = algorithm.params.iter().map(|p| p.name).collect();
        assert_eq!(
            listed, want,
            "the README's parameters of {}",
            algorithm.name
        );
        for param in algorithm.params {
            let after = params
                .split(&format!("`{}`", param.name))
                .nth(1)
                .unwrap_or("");
            let marked = after.trim_start().starts_with("(optional");
            assert_eq!(
                marked,
                !param.required,
                "{}: `{}` should {}be marked optional in the README",
                algorithm.name,
                param.name,
                if param.required { "not " } else { "" }
            );
        }
    }
}
