//! The lab's one error type, and the name parser every list option uses.

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

/// Parses a list of names against `all`; duplicates are dropped, and an
/// unknown name is an error that lists the valid ones.
///
/// ```
/// use vmlab::tree::Op;
/// let ops = vmlab::parse_names(&["load".into(), "iter".into()], &Op::ALL, Op::name, "op").unwrap();
/// assert_eq!(ops, [Op::Load, Op::Iter]);
/// assert!(vmlab::parse_names(&["nope".into()], &Op::ALL, Op::name, "op").is_err());
/// ```
pub fn parse_names<T: Copy + PartialEq>(
    names: &[String],
    all: &[T],
    name: fn(T) -> &'static str,
    what: &str,
) -> Result<Vec<T>, LabError> {
    let mut picked = Vec::new();
    for raw in names {
        let wanted = raw.trim();
        let Some(&item) = all.iter().find(|&&item| name(item) == wanted) else {
            let valid: Vec<&str> = all.iter().map(|&item| name(item)).collect();
            return Err(LabError(format!(
                "unknown {what} '{wanted}' (valid: {})",
                valid.join(", ")
            )));
        };
        if !picked.contains(&item) {
            picked.push(item);
        }
    }
    Ok(picked)
}
