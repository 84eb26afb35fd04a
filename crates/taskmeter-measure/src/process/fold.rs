//! Where a worker's checked samples are folded into its row: on the reader's thread, until the
//! reader falls behind the worker; from then on, where taskmeter may use three CPUs or more, on a
//! thread of its own, so that reading and checking one batch overlaps folding the one before.
//! Always on its own thread, the handoff (a wake-up a batch, the batches moving between cores)
//! cost a 10,000-unit run a sixth more of taskmeter's CPU; only a reader that cannot keep up needs
//! the second core, and only a machine with a core to spare has one to give it.

use std::sync::mpsc;
use taskmeter_protocol::SampleView;

/// Receives the checked samples of a worker's sample frames as they arrive, in batches (on the
/// thread reading the worker, or on the fold's own).
pub type SampleSink = Box<dyn FnMut(&[SampleView]) + Send>;

/// Samples folded together at most: 90 KiB of views, folded while still in the caches.
pub const BATCH: usize = 1024;
/// Batches handed to the fold's thread but not yet folded, at most: beyond, the reader waits
/// (the samples wait in the worker's sample file meanwhile).
const IN_FLIGHT: usize = 16;

pub struct Fold {
    /// The sink, while it folds on the reader's thread.
    here: Option<SampleSink>,
    /// The way to the fold's thread: first the sink, then the batches; the emptied ones back.
    sink_to_thread: Option<mpsc::Sender<SampleSink>>,
    batches: mpsc::SyncSender<Vec<SampleView>>,
    emptied: mpsc::Receiver<Vec<SampleView>>,
    /// The fold's thread could not be reached: the row's statistics would miss samples.
    pub gone: bool,
}

impl Fold {
    /// The fold, and the loop of its thread (which waits for the sink, and ends when the fold is
    /// dropped: at once if the sink never came).
    pub fn new(sink: SampleSink) -> (Fold, impl FnOnce() + Send) {
        let (sink_to_thread, sink_from_reader) = mpsc::channel::<SampleSink>();
        let (batches, to_fold) = mpsc::sync_channel::<Vec<SampleView>>(IN_FLIGHT);
        let (give_back, emptied) = mpsc::channel();
        let thread = move || {
            let Ok(mut sink) = sink_from_reader.recv() else { return };
            for mut batch in to_fold {
                sink(&batch);
                batch.clear();
                let _ = give_back.send(batch);
            }
        };
        let fold = Fold { here: Some(sink), sink_to_thread: Some(sink_to_thread), batches, emptied, gone: false };
        (fold, thread)
    }

    /// Folds `views` (emptied), here or on the fold's thread.
    pub fn take(&mut self, views: &mut Vec<SampleView>) {
        if let Some(sink) = self.here.as_mut() {
            sink(views);
            views.clear();
            return;
        }
        let empty = self.emptied.try_recv().unwrap_or_else(|_| Vec::with_capacity(BATCH));
        self.gone |= self.batches.send(std::mem::replace(views, empty)).is_err();
    }

    /// From now on, folds on a thread of its own (the reader has fallen behind). Once: the
    /// batches stay in order.
    pub fn move_to_its_thread(&mut self) {
        let (Some(sink), Some(way)) = (self.here.take(), self.sink_to_thread.take()) else { return };
        if let Err(mpsc::SendError(sink)) = way.send(sink) {
            // No thread to fold on: fold here, as slowly as that is.
            self.here = Some(sink);
        }
    }

    /// Whether it folds on a thread of its own.
    pub fn on_its_thread(&self) -> bool {
        self.here.is_none()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::{Arc, Mutex};
    use taskmeter_protocol::Sample;

    fn view(period: u64) -> SampleView {
        SampleView::new(1, 0, Sample { period, ..Sample::default() }, 1, None, true)
    }

    /// Batches folded here, then on the fold's thread, arrive whole and in order.
    #[test]
    fn every_batch_is_folded_once_in_order_here_then_on_its_thread() {
        let seen = Arc::new(Mutex::new(Vec::new()));
        let into = seen.clone();
        let (mut fold, thread) = Fold::new(Box::new(move |views: &[SampleView]| {
            into.lock().unwrap().extend(views.iter().map(|v| v.sample.period));
        }));
        let thread = std::thread::spawn(thread);
        let mut period = 0;
        for batch in 0..200 {
            if batch == 50 {
                fold.move_to_its_thread();
                assert!(fold.on_its_thread());
            }
            let mut views: Vec<SampleView> = (0..batch % 7 + 1)
                .map(|_| {
                    period += 1;
                    view(period)
                })
                .collect();
            fold.take(&mut views);
            assert!(views.is_empty());
        }
        drop(fold);
        thread.join().unwrap();
        assert_eq!(*seen.lock().unwrap(), (1..=period).collect::<Vec<_>>());
    }

    /// With no thread to fold on, the sink stays on the reader's.
    #[test]
    fn without_its_thread_the_fold_stays_here() {
        let (mut fold, thread) = Fold::new(Box::new(|_: &[SampleView]| {}));
        drop(thread);
        fold.move_to_its_thread();
        assert!(!fold.on_its_thread());
        fold.take(&mut vec![view(1)]);
        assert!(!fold.gone);
    }
}
