//! What the core answers an application's command with: shared by the applications
//! (`app.rs`, `engine_app.rs`) and the runner, a leaf so that neither application imports the
//! other for it.

use crate::consumer::driver::{CommitResults, PollAnswer};
use crate::error::Result;

/// A reply of the core, to the command of the id it comes with.
#[derive(Debug)]
pub(crate) enum Reply {
    Poll(Result<PollAnswer>),
    Commit(CommitResults),
    Close(Result<()>),
}
