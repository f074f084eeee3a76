//! Stopping a long measurement between points: the first SIGINT or
//! SIGTERM asks the run to stop after the point it is measuring (so what
//! was measured is kept and written up), a second one ends the process at
//! once with status 128 + the signal.
//!
//! `signal-hook` sets a flag from the handler (no hand-written unsafe
//! handler); the measuring loop reads it between points.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use crate::LabError;

/// Stops a run at the next point on the first SIGINT or SIGTERM; a second
/// one ends the process.
///
/// When this is dropped the run is over, and the signals end the process
/// at once again, with status 128 + the signal: signal-hook cannot give a
/// signal its default action back (unregistering a handler leaves the
/// signal ignored), so the exiting handler stays, armed.
pub struct StopSignals {
    stop: Arc<AtomicBool>,
    /// The handlers that only set `stop`, removed on drop.
    flaggers: Vec<signal_hook::SigId>,
}

impl StopSignals {
    /// Installs the handlers (see the type's docs for what is left when
    /// the value is dropped).
    pub fn install() -> Result<StopSignals, LabError> {
        use signal_hook::consts::{SIGINT, SIGTERM};
        let stop = Arc::new(AtomicBool::new(false));
        let mut me = StopSignals {
            stop: Arc::clone(&stop),
            flaggers: Vec::new(),
        };
        for sig in [SIGINT, SIGTERM] {
            let fail = |e: std::io::Error| LabError(format!("cannot handle signal {sig}: {e}"));
            // The exit is registered first: it sees the flag the first
            // signal set only from the second signal on.
            signal_hook::flag::register_conditional_shutdown(sig, 128 + sig, Arc::clone(&stop))
                .map_err(fail)?;
            me.flaggers
                .push(signal_hook::flag::register(sig, Arc::clone(&stop)).map_err(fail)?);
        }
        Ok(me)
    }

    /// Whether a first SIGINT or SIGTERM has arrived.
    pub fn requested(&self) -> bool {
        self.stop.load(Ordering::SeqCst)
    }
}

impl Drop for StopSignals {
    fn drop(&mut self) {
        // Armed first, so no signal can fall between the two handlers.
        self.stop.store(true, Ordering::SeqCst);
        for id in self.flaggers.drain(..) {
            signal_hook::low_level::unregister(id);
        }
    }
}
