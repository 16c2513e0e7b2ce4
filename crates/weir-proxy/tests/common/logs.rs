//! Log capture: a `tracing` subscriber for the test's thread that keeps every event as
//! `LEVEL message field=value …`. The proxy, the backend and the client all run on a
//! current-thread runtime, so every task's events land here.

use std::fmt::{self, Write as _};
use std::sync::{Arc, Mutex};

use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing::{Event, Level, Metadata, Subscriber};

/// The events captured so far.
#[derive(Clone, Default)]
pub struct Logs {
    lines: Arc<Mutex<Vec<(Level, String)>>>,
}

impl Logs {
    /// Captures this thread's events until the guard drops.
    pub fn capture() -> (Self, tracing::subscriber::DefaultGuard) {
        let logs = Self::default();
        let guard = tracing::subscriber::set_default(Capture(logs.clone()));
        (logs, guard)
    }

    /// The lines at `level`.
    pub fn at(&self, level: Level) -> Vec<String> {
        self.lines
            .lock()
            .unwrap()
            .iter()
            .filter(|(l, _)| *l == level)
            .map(|(_, line)| line.clone())
            .collect()
    }
}

struct Capture(Logs);

struct Line(String);

impl Visit for Line {
    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        if field.name() == "message" {
            let _ = write!(self.0, " {value:?}");
        } else {
            let _ = write!(self.0, " {}={value:?}", field.name());
        }
    }
}

impl Subscriber for Capture {
    fn enabled(&self, _: &Metadata<'_>) -> bool {
        true
    }

    fn new_span(&self, _: &Attributes<'_>) -> Id {
        Id::from_u64(1)
    }

    fn record(&self, _: &Id, _: &Record<'_>) {}

    fn record_follows_from(&self, _: &Id, _: &Id) {}

    fn event(&self, event: &Event<'_>) {
        let mut line = Line(String::new());
        event.record(&mut line);
        let level = *event.metadata().level();
        self.0
            .lines
            .lock()
            .unwrap()
            .push((level, format!("{level}{}", line.0)));
    }

    fn enter(&self, _: &Id) {}

    fn exit(&self, _: &Id) {}
}
