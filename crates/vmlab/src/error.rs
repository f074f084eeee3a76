//! The lab's one error type.

/// A failed lab run: invalid settings, a configuration the model refused,
/// an implementation that gave wrong answers, or output that could not be
/// written. The message is one line, ready to print.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct LabError(pub String);

impl From<vmresults::output::WriteError> for LabError {
    fn from(e: vmresults::output::WriteError) -> Self {
        LabError(e.0)
    }
}
