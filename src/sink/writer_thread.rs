//! A thread of its own that owns a sink's blocking resource (the file sink's file) and runs
//! the jobs handed to it, one at a time, each answered through a oneshot: file IO never
//! blocks the runtime's worker threads, and a slow file system stalls only its own task.
//!
//! Why not `spawn_blocking` per job: every job then goes through tokio's blocking pool (its
//! mutex, which the tasks' `put`s contend for, and a condvar that wakes whichever pool thread
//! is idle). strace on the plain file sink (400k records, 3 tasks, ~400 records a `put`): 7,108
//! futex calls, ~7 a `put`, where our consumer alone made 332 for the same records; the
//! sink's system CPU was as large as its user CPU. A thread per task takes one wake to start
//! a job and one to answer it.

use std::sync::mpsc;

use tokio::sync::oneshot;

type Job<S> = Box<dyn FnOnce(&mut S) + Send>;

/// The thread and the way to it. Dropping it ends the thread once the jobs handed to it are
/// done (there are none left: every job is awaited by the one caller).
pub(crate) struct WriterThread<S> {
    jobs: mpsc::Sender<Job<S>>,
}

impl<S: Send + 'static> WriterThread<S> {
    /// Starts the thread, which owns `state` from now on.
    pub(crate) fn spawn(name: &str, state: S) -> std::io::Result<WriterThread<S>> {
        let (jobs, inbox) = mpsc::channel::<Job<S>>();
        std::thread::Builder::new().name(name.to_string()).spawn(move || {
            let mut state = state;
            // Ends when the sender is dropped (the sink stopped, or was dropped).
            while let Ok(job) = inbox.recv() {
                job(&mut state);
            }
        })?;
        Ok(WriterThread { jobs })
    }

    /// Runs `op` on the thread and gives its answer; `None` if the thread is gone (it
    /// panicked in an earlier job). A caller that stops waiting leaves the job to finish
    /// there, its answer dropped.
    pub(crate) async fn run<T, F>(&self, op: F) -> Option<T>
    where
        T: Send + 'static,
        F: FnOnce(&mut S) -> T + Send + 'static,
    {
        let (answer, answered) = oneshot::channel();
        let job: Job<S> = Box::new(move |state: &mut S| {
            // The caller may have stopped waiting: nothing to tell it then.
            let _ = answer.send(op(state));
        });
        self.jobs.send(job).ok()?;
        answered.await.ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn jobs_run_in_order_on_the_state_the_thread_owns() {
        let w = WriterThread::spawn("test-writer", Vec::new()).expect("a thread");
        for i in 0..3 {
            assert_eq!(w.run(move |v: &mut Vec<i32>| v.push(i)).await, Some(()));
        }
        assert_eq!(w.run(|v: &mut Vec<i32>| v.clone()).await, Some(vec![0, 1, 2]));
        assert_ne!(w.run(|_: &mut Vec<i32>| std::thread::current().id()).await, Some(std::thread::current().id()));
    }

    #[tokio::test]
    async fn a_thread_that_died_answers_none_not_a_panic() {
        let w = WriterThread::spawn("test-writer", ()).expect("a thread");
        // The panic ends the thread (its message goes to stderr): this job's answer is lost.
        assert_eq!(w.run(|_: &mut ()| -> u8 { panic!("a job that panics") }).await, None);
        assert_eq!(w.run(|_: &mut ()| 1).await, None, "later jobs find the thread gone");
    }
}
