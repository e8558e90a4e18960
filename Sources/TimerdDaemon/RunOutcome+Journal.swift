import TimerdEngine
import TimerdSystem

extension RunOutcome {
    /// The journal's `TIMERD_EXIT_STATUS=`: the exit status, or the signal's name (`SIGKILL`), or `none`
    /// when the run never started.
    var exitStatusField: String {
        if let exitCode { return String(exitCode) }
        if let signal { return "\(Signal(rawValue: Int32(signal)))" }
        return "none"
    }
}
