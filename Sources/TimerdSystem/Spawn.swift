import CTimerdSys
import Glibc
import TimerdCore

/// The identity a spawned command runs as instead of the daemon's: real, effective and saved
/// user and group ids, and exactly this supplementary group list.
///
/// `groups` is what setgroups sets, as is: for a user's usual list, take
/// `UserAccount.supplementaryGroups(primary:)` (or `init(account:)`), the list initgroups would
/// set. It is computed before the spawn because initgroups cannot run between clone and exec.
public struct Credentials: Sendable, Hashable {
    public var uid: UInt32
    public var gid: UInt32
    public var groups: [UInt32]

    public init(uid: UInt32, gid: UInt32, groups: [UInt32]) {
        self.uid = uid
        self.gid = gid
        self.groups = groups
    }
}

/// Why a command could not be started.
public struct SpawnError: Error, Sendable, Equatable, CustomStringConvertible {
    /// What failed.
    public enum Stage: Sendable, Equatable {
        /// The program was not found or could not be executed.
        case program
        /// The working directory does not exist, is not a directory, or is not searchable (with
        /// the new identity, when there is one).
        case workingDirectory
        /// The identity could not be changed to the requested credentials: setgroups, setresgid or
        /// setresuid failed, or the change was incomplete or reversible (EPERM).
        case credentials
        /// An argument or environment entry contains a NUL byte, or a name contains "=".
        case invalidArgument
        /// The child could not be created in the cgroup it was given (clone3 with `CLONE_INTO_CGROUP`
        /// failed: not a cgroup v2 directory, a cgroup with controllers that has children, a limit).
        case cgroup
        /// A setting of the child's own process (`ResourceSettings`: `nice`, `ionice`, `oom_score_adj`, a
        /// `limit_*`) could not be made; `setting` names its key.
        case resources
    }

    public var stage: Stage
    public var errno: Errno
    public var program: String
    public var workingDirectory: String?
    /// The identity the command was to run as (nil: the daemon's own).
    public var credentials: Credentials?
    /// With `.resources`: the key of the setting that failed (`limit_nofile`).
    public var setting: String?

    public init(
        stage: Stage, errno: Errno, program: String, workingDirectory: String?, credentials: Credentials? = nil
    ) {
        self.stage = stage
        self.errno = errno
        self.program = program
        self.workingDirectory = workingDirectory
        self.credentials = credentials
    }

    /// "cannot start /no/such: No such file or directory (ENOENT)"; for a bad working directory
    /// "cannot start /bin/true: working directory /nope: No such file or directory (ENOENT)"; for
    /// a failed change of identity "cannot start /bin/sh as uid 1001 (gid 1001): Operation not
    /// permitted (EPERM)".
    public var description: String {
        switch stage {
        case .program:
            "cannot start \(program): \(errno)"
        case .workingDirectory:
            "cannot start \(program): working directory \(workingDirectory ?? "?"): \(errno)"
        case .credentials:
            "cannot start \(program) as uid \(credentials.map { String($0.uid) } ?? "?")"
                + " (gid \(credentials.map { String($0.gid) } ?? "?")): \(errno)"
        case .invalidArgument:
            "cannot start \(program): an argument or environment entry contains a NUL byte or a bad name"
        case .cgroup:
            "cannot start \(program) in its cgroup: \(errno)"
        case .resources:
            "cannot start \(program): cannot set \(setting ?? "its process settings"): \(errno)"
        }
    }
}

/// A started child process: the leader of its own session and process group.
///
/// The `pidfd` is owned by the caller, who closes it (for example in the cancel handler of the
/// Dispatch read source watching it) after reaping the child with `waitExit()`.
public struct ChildProcess: Sendable, Hashable {
    /// The child's pid, which is also its process-group and session id.
    public let pid: Int32
    /// A close-on-exec pidfd: readable once the child has ended.
    public let pidfd: FileDescriptor

    public init(pid: Int32, pidfd: FileDescriptor) {
        self.pid = pid
        self.pidfd = pidfd
    }

    /// Reaps the child if it has ended (nil if still running); see `ProcessControl.waitExit`.
    ///
    /// The corresponding C function is `waitpid`.
    public func waitExit(blocking: Bool = false) throws(Errno) -> TerminationStatus? {
        try ProcessControl.waitExit(pid: pid, blocking: blocking)
    }

    /// `waitExit`, with what the child and the children it reaped used.
    ///
    /// The corresponding C function is `wait4`.
    public func waitExitWithUsage(blocking: Bool = false) throws(Errno) -> (status: TerminationStatus, usage: ResourceUsage)? {
        try ProcessControl.waitExitWithUsage(pid: pid, blocking: blocking)
    }

    /// Sends `signal` to the child alone, through its pidfd, so a recycled pid is never hit.
    /// Returns false if it has already been reaped (ESRCH).
    ///
    /// The corresponding C function is `pidfd_send_signal`.
    public func signal(_ signal: Signal) throws(Errno) -> Bool {
        try ProcessControl.sendSignal(tsys_pidfd_send_signal(pidfd.rawValue, signal.rawValue))
    }

    /// Sends `signal` to the child's whole process group (its descendants too, unless they
    /// moved to another group). Returns false if the group no longer exists (ESRCH).
    ///
    /// The corresponding C function is `kill` (with a negative pid).
    public func signalGroup(_ signal: Signal) throws(Errno) -> Bool {
        try ProcessControl.signalProcessGroup(pid, signal)
    }
}

/// Starting commands: clone3 (CLONE_VM) and execve, with an optional change of identity in between
/// (see `tsys_spawn_start` in CTimerdSys).
public enum Spawn {
    /// The search path used when `environment` has no PATH.
    public static let defaultSearchPath = "/usr/local/bin:/usr/bin:/bin"

    /// Starts `program` with `arguments` (argv[1...]; argv[0] is `program` as given) and exactly
    /// `environment`, in a new session and process group, with an empty signal mask and default
    /// signal dispositions, stdin from /dev/null, stdout on `output` and stderr on `errors` (both on
    /// `output` without it; typically pipes' write ends, which the caller closes after this returns), and
    /// no other open descriptors. A `program` without "/" is searched in the absolute directories of
    /// `environment["PATH"]` (default `defaultSearchPath`); one with "/" is used as is, and if
    /// relative, resolved in `workingDirectory`. The child's pidfd is made with it.
    ///
    /// With `credentials`, the child switches to that identity (supplementary groups, then real,
    /// effective and saved gid, then uid; checked, and for a uid other than 0 checked to be
    /// irreversible) before it changes to `workingDirectory` and executes `program`, so both are
    /// checked with the new identity's rights. Changing identity needs root (CAP_SETUID and
    /// CAP_SETGID); otherwise it fails with EPERM, even for the caller's own ids. The PATH search
    /// still runs with the caller's identity. Without `credentials`, the child keeps the caller's.
    ///
    /// With `cgroup` (a cgroup v2 directory, `CgroupDirectory.open`), the child is created inside that
    /// cgroup, so nothing it starts, even before its `execve`, runs outside it.
    ///
    /// With `settings`, the child sets its own `nice`, `ionice`, `oom_score_adj` and `limit_*` (the rest
    /// of `ResourceSettings` belongs to the cgroup) before its change of identity. With `oom_score_adj`
    /// the call waits for the child's `execve` (see `tsys_spawn_start`).
    ///
    /// Safe to call from any thread. Throws `SpawnError` with the errno of the failure and what
    /// it concerned (the program, the working directory or the credentials), as the child
    /// reported it; nothing is left running then and nothing of `program` ran.
    ///
    /// The corresponding C functions are `clone3`, `setgroups`, `setresgid`, `setresuid`, `chdir`,
    /// `execve` (in `tsys_spawn_start`).
    public static func run(
        program: String,
        arguments: [String] = [],
        environment: [String: String],
        workingDirectory: String? = nil,
        credentials: Credentials? = nil,
        output: FileDescriptor,
        errors: FileDescriptor? = nil,
        cgroup: FileDescriptor? = nil,
        settings: ResourceSettings? = nil
    ) throws(SpawnError) -> ChildProcess {
        let started = try start(
            program: program, arguments: arguments, environment: environment, workingDirectory: workingDirectory,
            credentials: credentials, output: output, errors: errors, cgroup: cgroup, settings: settings)
        if let failure = started.exec.outcome() {
            _ = try? started.child.waitExit(blocking: true)
            try? started.child.pidfd.close()
            throw failure
        }
        return started.child
    }

    /// `run` without waiting for the child to reach `execve`: returns as soon as the child exists, so the
    /// caller is never held by the child's set-up (which on a busy machine includes waiting for a CPU,
    /// and blocks for as long as a `chdir` or `execve` on a hung file system does). Whether the program
    /// was started is known once the child has left the caller's memory: `PendingExec.outcome()`, which
    /// never waits once the child was seen to exit. A child that could not start the program (the
    /// errors `run` throws from the child's side) exits with status 127 before running any of it.
    ///
    /// Throws what `run` throws before the child exists: arguments, the PATH search, clone.
    ///
    /// The corresponding C functions are `clone3`, `setgroups`, `setresgid`, `setresuid`, `chdir`,
    /// `execve` (in `tsys_spawn_start`).
    public static func start(
        program: String,
        arguments: [String] = [],
        environment: [String: String],
        workingDirectory: String? = nil,
        credentials: Credentials? = nil,
        output: FileDescriptor,
        errors: FileDescriptor? = nil,
        cgroup: FileDescriptor? = nil,
        settings: ResourceSettings? = nil
    ) throws(SpawnError) -> (child: ChildProcess, exec: PendingExec) {
        let failure = { @Sendable (stage: SpawnError.Stage, errno: Errno, setting: String?) -> SpawnError in
            var error = SpawnError(
                stage: stage, errno: errno, program: program, workingDirectory: workingDirectory,
                credentials: credentials)
            error.setting = setting
            return error
        }
        let failed = { (stage: SpawnError.Stage, errno: Errno) -> SpawnError in failure(stage, errno, nil) }

        let argv = [program] + arguments
        let envp = environment.sorted { $0.key.utf8.lexicographicallyPrecedes($1.key.utf8) }
            .map { "\($0.key)=\($0.value)" }
        let hasNul = { (text: String) in text.utf8.contains(0) }
        if argv.contains(where: hasNul) || envp.contains(where: hasNul)
            || environment.keys.contains(where: { $0.isEmpty || $0.utf8.contains(UInt8(ascii: "=")) })
            || workingDirectory.map(hasNul) == true {
            throw failed(.invalidArgument, .invalidArgument)
        }
        if let credentials, credentials.groups.count > Int(Int32.max) {
            throw failed(.credentials, .invalidArgument)
        }

        let path: String
        do {
            path = try resolve(program, searchPath: environment["PATH"] ?? defaultSearchPath)
        } catch {
            throw failed(.program, error)
        }

        var pid: pid_t = 0
        var pidfd: Int32 = -1
        var pending: OpaquePointer?
        let status = withCStringArray(argv) { argvPointer in
            withCStringArray(envp) { envpPointer in
                withCCredentials(credentials) { credentialsPointer in
                    withCSettings(settings) { settingsPointer in
                        tsys_spawn_start(
                            &pid, &pidfd, &pending, path, argvPointer, envpPointer, workingDirectory, output.rawValue,
                            errors?.rawValue ?? -1, credentialsPointer, cgroup?.rawValue ?? -1, settingsPointer)
                    }
                }
            }
        }
        guard status == 0, let pending else { throw failed(cgroup == nil ? .program : .cgroup, Errno(rawValue: status)) }
        return (ChildProcess(pid: pid, pidfd: FileDescriptor(rawValue: pidfd)), PendingExec(pending, failure: failure))
    }

    /// Finds `program` like execvp: as is if it contains "/", else the first executable regular
    /// file in the absolute directories of `searchPath`. Throws ENOENT, or EACCES if only
    /// non-executable candidates were found.
    static func resolve(_ program: String, searchPath: String) throws(Errno) -> String {
        if program.isEmpty {
            throw .noSuchFileOrDirectory
        }
        if program.utf8.contains(UInt8(ascii: "/")) {
            return program
        }
        var sawNonExecutable = false
        for directory in searchPath.split(separator: ":") where directory.hasPrefix("/") {
            let candidate = directory.hasSuffix("/") ? "\(directory)\(program)" : "\(directory)/\(program)"
            guard FileSystem.isRegularFile(candidate) else {
                continue
            }
            if access(candidate, X_OK) == 0 {
                return candidate
            }
            sawNonExecutable = true
        }
        throw sawNonExecutable ? .permissionDenied : .noSuchFileOrDirectory
    }

    /// Calls `body` with the process settings of `settings` as a C `struct tsys_process_settings`, or with
    /// nil when it sets none of them.
    private static func withCSettings<Result>(
        _ settings: ResourceSettings?, _ body: (UnsafePointer<tsys_process_settings>?) -> Result
    ) -> Result {
        guard let settings, settings.nice != nil || settings.ionice != nil || settings.oomScoreAdj != nil
            || !settings.limits.isEmpty else { return body(nil) }
        let limits = settings.limits.map { tsys_rlimit(resource: $0.kind.resource, soft: $0.soft.raw, hard: $0.hard.raw) }
        return limits.withUnsafeBufferPointer { buffer in
            let c = tsys_process_settings(
                set_nice: settings.nice == nil ? 0 : 1, nice: Int32(settings.nice ?? 0),
                set_ioprio: settings.ionice == nil ? 0 : 1, ioprio: settings.ionice?.kernelValue ?? 0,
                set_oom_score_adj: settings.oomScoreAdj == nil ? 0 : 1, oom_score_adj: Int32(settings.oomScoreAdj ?? 0),
                limit_count: buffer.count, limits: buffer.baseAddress)
            return withUnsafePointer(to: c) { body($0) }
        }
    }

    /// Calls `body` with `credentials` as a C `struct tsys_credentials`, or with nil.
    private static func withCCredentials<Result>(
        _ credentials: Credentials?, _ body: (UnsafePointer<tsys_credentials>?) -> Result
    ) -> Result {
        guard let credentials else {
            return body(nil)
        }
        return credentials.groups.withUnsafeBufferPointer { groups in
            let cCredentials = tsys_credentials(
                uid: credentials.uid, gid: credentials.gid, groups: groups.baseAddress, group_count: groups.count)
            return withUnsafePointer(to: cCredentials) { body($0) }
        }
    }

    /// Calls `body` with a NULL-terminated array of C strings copied from `strings`.
    private static func withCStringArray<Result>(
        _ strings: [String], _ body: (UnsafePointer<UnsafeMutablePointer<CChar>?>) -> Result
    ) -> Result {
        let pointers: [UnsafeMutablePointer<CChar>?] = strings.map { strdup($0) } + [nil]
        defer {
            for pointer in pointers {
                free(pointer)
            }
        }
        return pointers.withUnsafeBufferPointer { body($0.baseAddress!) }
    }
}

/// A spawned child's start that may still be under way (`Spawn.start`): the memory the child runs on
/// until it calls `execve`, and what it reports if it cannot.
public final class PendingExec: @unchecked Sendable {
    // Touched only by `outcome` (once) and `deinit`, which the owner does not call concurrently.
    private var pending: OpaquePointer?
    private let failure: @Sendable (SpawnError.Stage, Errno, String?) -> SpawnError

    init(_ pending: OpaquePointer, failure: @escaping @Sendable (SpawnError.Stage, Errno, String?) -> SpawnError) {
        self.pending = pending
        self.failure = failure
    }

    /// Once `outcome` said the program started: the peak resident size of the caller's memory as the child
    /// saw it just before its `execve`, which Linux carries over into the child's own (so a `wait4` max
    /// RSS no larger than this says nothing of the program). Nil when unknown.
    public private(set) var inheritedPeakBytes: Int64?

    /// Whether the child has called `execve` or exited (and `outcome` will not wait).
    public var settled: Bool { pending.map { tsys_spawn_settled($0) != 0 } ?? true }

    /// nil if the child reached `execve` (the program is running or ran), else why it could not start
    /// it. Waits until the child has left the caller's memory (not at all once it was seen to exit), so
    /// call it then, or to wait for the start as `Spawn.run` does. Later calls return nil.
    public func outcome() -> SpawnError? {
        guard let pending else { return nil }
        self.pending = nil
        var stage: Int32 = 0
        var detail: Int32 = 0
        var inherited: Int64 = 0
        let status = tsys_spawn_finish(pending, &stage, &detail, &inherited)
        inheritedPeakBytes = inherited > 0 ? inherited * 1024 : nil
        guard status != 0 else { return nil }
        // The child says which step failed; the rest (the session, descriptors, signals) is part of
        // starting the program.
        let errno = Errno(rawValue: status)
        switch stage {
        case TSYS_SPAWN_STAGE_CREDENTIALS: return failure(.credentials, errno, nil)
        case TSYS_SPAWN_STAGE_CHDIR: return failure(.workingDirectory, errno, nil)
        case TSYS_SPAWN_STAGE_RESOURCES: return failure(.resources, errno, Self.settingKey(detail))
        default: return failure(.program, errno, nil)
        }
    }

    /// The key of the setting a child's `TSYS_SPAWN_DETAIL_*` names.
    static func settingKey(_ detail: Int32) -> String? {
        switch detail {
        case TSYS_SPAWN_DETAIL_NICE: "nice"
        case TSYS_SPAWN_DETAIL_IOPRIO: "ionice"
        case TSYS_SPAWN_DETAIL_OOM_SCORE_ADJ: "oom_score_adj"
        default: ProcessLimit.Kind.allCases.first { $0.resource == detail - TSYS_SPAWN_DETAIL_RLIMIT }?.key
        }
    }

    deinit {
        // Freed only once the child no longer runs on it; a child still starting keeps it (a few pages).
        if let pending, tsys_spawn_settled(pending) != 0 { _ = tsys_spawn_finish(pending, nil, nil, nil) }
    }
}
