//! A front end's own dashboard panels ([`Panel`]), the one hook through which the
//! dashboard (`weir-listen`'s `GET /dashboard/data`) shows what only that front end has:
//! under `weir proxy`, each upstream's circuit breaker and the in-flight limit. The engine
//! knows panels by name only, never the features behind them. A panel is read when the
//! dashboard asks (once a second while a page is open), beside the path of a decision,
//! never on it.

use std::sync::{Mutex, PoisonError};

/// A front end's panel: what it shows now, as JSON; the dashboard's data carries it under
/// `panels.<name>`. Values a client could have chosen must be escaped by the panel (the
/// page writes them as text, never as markup).
pub type Panel = Box<dyn Fn() -> serde_json::Value + Send + Sync>;

/// The panels added with [`Metrics::add_panel`](super::Metrics::add_panel), in order.
#[derive(Default)]
pub(crate) struct Panels(Mutex<Vec<(&'static str, Panel)>>);

impl Panels {
    /// Adds `panel` as `name`; a second panel of the same name takes the first's place.
    pub(crate) fn add(&self, name: &'static str, panel: Panel) {
        let mut panels = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        panels.retain(|(n, _)| *n != name);
        panels.push((name, panel));
    }

    /// Every panel now, by name.
    pub(crate) fn views(&self) -> serde_json::Map<String, serde_json::Value> {
        let panels = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        panels
            .iter()
            .map(|(name, panel)| ((*name).to_string(), panel()))
            .collect()
    }
}

impl std::fmt::Debug for Panels {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let panels = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        f.debug_list()
            .entries(panels.iter().map(|(n, _)| n))
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::Panels;

    #[test]
    fn panels_are_read_by_name_and_a_name_is_kept_once() {
        let panels = Panels::default();
        assert!(panels.views().is_empty());
        panels.add("in_flight", Box::new(|| json!({ "limit": 8 })));
        panels.add("upstreams", Box::new(|| json!([])));
        panels.add("in_flight", Box::new(|| json!({ "limit": 4 })));
        let views = panels.views();
        assert_eq!(views.len(), 2);
        assert_eq!(views["in_flight"], json!({ "limit": 4 }));
        assert_eq!(views["upstreams"], json!([]));
    }
}
