//! Threads started before the child they serve. A child that reaches the user's thread limit
//! (RLIMIT_NPROC: `ulimit -u`, a container's pids limit) as soon as it runs, as a worker asked
//! for more units than the limit allows does, would otherwise keep taskmeter from starting the
//! threads that read and reap it (std's `thread::spawn` panics then).

use std::sync::mpsc;
use std::thread::JoinHandle;

type Job = Box<dyn FnOnce() + Send>;

/// A thread waiting for its one job; dropped unused, it ends.
pub struct Spare {
    jobs: mpsc::Sender<Job>,
    thread: JoinHandle<()>,
}

impl Spare {
    pub fn start() -> std::io::Result<Spare> {
        let (jobs, job) = mpsc::channel::<Job>();
        let thread = std::thread::Builder::new().spawn(move || {
            if let Ok(job) = job.recv() {
                job()
            }
        })?;
        Ok(Spare { jobs, thread })
    }

    /// Runs `job` on the spare thread.
    pub fn run<T: Send + 'static>(self, job: impl FnOnce() -> T + Send + 'static) -> Running<T> {
        let (result, outcome) = mpsc::sync_channel(1);
        let _ = self.jobs.send(Box::new(move || {
            let _ = result.send(job());
        }));
        Running { outcome, thread: Some(self.thread) }
    }
}

/// A job on a spare thread.
pub struct Running<T> {
    outcome: mpsc::Receiver<T>,
    thread: Option<JoinHandle<()>>,
}

impl<T> Running<T> {
    /// A job that could not be given a thread: it never runs, and `join` says so.
    pub fn never() -> Running<T> {
        let (_, outcome) = mpsc::sync_channel(1);
        Running { outcome, thread: None }
    }

    /// Waits for the job's end: its result, or Err if it panicked or never ran (as
    /// `JoinHandle::join`).
    pub fn join(self) -> std::thread::Result<T> {
        if let Some(thread) = self.thread {
            let _ = thread.join();
        }
        self.outcome.try_recv().map_err(|_| Box::new("the job did not finish") as Box<dyn std::any::Any + Send>)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_spare_runs_its_job_and_join_gives_the_result_or_says_it_failed() {
        assert_eq!(Spare::start().unwrap().run(|| 6 * 7).join().ok(), Some(42));
        let panicked = Spare::start().unwrap().run(|| -> u8 { panic!("a job that fails") });
        assert!(panicked.join().is_err());
        assert!(Running::<u8>::never().join().is_err());
        // Dropped unused, a spare's thread ends (its channel closes).
        let spare = Spare::start().unwrap();
        let thread = spare.thread;
        drop(spare.jobs);
        thread.join().unwrap();
    }
}
