import TimerdCore
import TimerdEngine

/// Everything needed to start one run of a job's action.
struct RunRequest: Sendable {
    var job: String
    var runID: Int
    var action: Action
    /// The complete environment of the child.
    var environment: [String: String]
    var workingDirectory: String
    var timeout: Duration?
    var killGrace: Duration
    /// A webhook run's body, placeholders filled (nil: none, or not a webhook).
    var webhookBody: String? = nil
    /// Who a command runs as (nil: timerd's own identity).
    var runAs: RunAs? = nil
    /// What stopping a command signals (`kill_mode`).
    var killMode: KillMode = .controlGroup
    /// What the run may use: the job's settings, under the per-user ceilings for a job of a user other than root.
    var resources = ResourceSettings()
    /// The exit statuses that mean success (`success_exit_codes`).
    var successExitCodes: [Int] = [0]
    /// Any output on stderr fails the run (`fail_on_stderr`): stderr then has a pipe of its own.
    var failOnStderr = false
    /// Arguments of a run by hand (`RUN … -- ARG…`): after a program job's own, or `$1`… of a command's shell.
    var extraArguments: [String] = []
    /// Where the run's output is appended too (`log_file`).
    var logFile: RunLogFile.Settings?
}

/// The user (and group) a command runs as. Resolved by the launcher just before the run, so a changed
/// account (new groups, a new home) is seen, and a deleted one fails the run instead of running it as root.
struct RunAs: Sendable, Equatable {
    enum User: Sendable, Equatable {
        case named(String)
        case uid(UInt32)
    }
    var user: User
    /// The primary group instead of the user's own (`group=`).
    var group: String?

    /// Set from the account when the job's own `env=` does not set them.
    static let accountVariables: Set<String> = ["HOME", "USER", "LOGNAME", "PATH"]
    /// `PATH` of a run as a user other than root (root's includes the sbin directories).
    static let userPath = "/usr/local/bin:/usr/bin:/bin"
}

/// What a launcher reports back about a run, in order: `started` (or nothing, if spawning failed), then
/// exactly one `finished`.
enum RunEvent: Sendable {
    /// The process is running (no pid for a webhook request).
    case started(pid: Int32?)
    case finished(RunOutcome)
}

/// A way to ask a run in progress to stop.
protocol RunHandle: Sendable {
    /// SIGTERM to the run's process group, SIGKILL after the kill grace; the outcome says `killed` with `reason`.
    func stop(reason: String)
    /// SIGKILL to the run's process group now.
    func kill(reason: String)
}

/// Starts runs away from the registry's queue and logs their output lines itself. The registry calls `start` and returns at once; events come
/// back through `events`, on the launcher's own queue.
protocol RunLauncher: Sendable {
    func start(_ request: RunRequest, events: @escaping @Sendable (RunEvent) -> Void) -> any RunHandle
}

/// Commands to the command launcher, webhooks to the webhook launcher.
struct ActionLauncher: RunLauncher {
    let commands: any RunLauncher
    let webhooks: any RunLauncher

    func start(_ request: RunRequest, events: @escaping @Sendable (RunEvent) -> Void) -> any RunHandle {
        if case .webhook = request.action { return webhooks.start(request, events: events) }
        return commands.start(request, events: events)
    }
}
