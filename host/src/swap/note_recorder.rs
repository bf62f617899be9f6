//! Events about the guest ConfigMap, one series per reason *and note*.
//!
//! kube's [`Recorder`] folds every Event of one type, reason and action about one object into a
//! series that keeps its first note, so a second rejection for another cause would only raise
//! the count of the first. client-go's events broadcaster keys a series by the note too; this
//! does the same, with one recorder (one series cache) per note. Swap Events are few, so the
//! recorders are too; the oldest are dropped past [`MAX_NOTES`].

use std::collections::VecDeque;

use k8s_openapi::api::core::v1::ObjectReference;
use kube::Client;
use kube::runtime::events::{Event, Recorder, Reporter};

/// Distinct notes whose series are kept.
const MAX_NOTES: usize = 32;

/// Publishes Events, aggregating repeats of one note only.
pub(super) struct NoteRecorder {
    client: Client,
    reporter: Reporter,
    by_note: VecDeque<(String, Recorder)>,
}

impl NoteRecorder {
    /// Reports as `reporter`.
    pub(super) fn new(client: Client, reporter: Reporter) -> Self {
        Self {
            client,
            reporter,
            by_note: VecDeque::new(),
        }
    }

    /// Publishes `event` about `regarding`: a repeat of an earlier Event with the same reason
    /// and note raises that Event's series count; any other note is a new Event.
    pub(super) async fn publish(
        &mut self,
        event: &Event,
        regarding: &ObjectReference,
    ) -> Result<(), kube::Error> {
        let key = format!("{}\n{}", event.reason, event.note.as_deref().unwrap_or(""));
        let recorder = match self.by_note.iter().find(|(k, _)| *k == key) {
            Some((_, recorder)) => recorder.clone(),
            None => {
                let recorder = Recorder::new(self.client.clone(), self.reporter.clone());
                if self.by_note.len() == MAX_NOTES {
                    self.by_note.pop_front();
                }
                self.by_note.push_back((key, recorder.clone()));
                recorder
            }
        };
        recorder.publish(event, regarding).await
    }
}
