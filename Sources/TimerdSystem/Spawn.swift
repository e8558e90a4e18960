import CTimerdSys
import Glibc

/// Why a command could not be started.
public struct SpawnError: Error, Sendable, Equatable, CustomStringConvertible {
    /// What failed.
    public enum Stage: Sendable, Equatable {
        /// The program was not found or could not be executed.
        case program
        /// The working directory does not exist, is not a directory, or is not searchable.
        case workingDirectory
        /// An argument or environment entry contains a NUL byte, or a name contains "=".
        case invalidArgument
        /// The child started but could not be tracked (pidfd_open failed); it was killed.
        case tracking
    }

    public var stage: Stage
    public var errno: Errno
    public var program: String
    public var workingDirectory: String?

    public init(stage: Stage, errno: Errno, program: String, workingDirectory: String?) {
        self.stage = stage
        self.errno = errno
        self.program = program
        self.workingDirectory = workingDirectory
    }

    /// "cannot start /no/such: No such file or directory (ENOENT)", or for a bad working
    /// directory "cannot start /bin/true: working directory /nope: No such file or directory (ENOENT)".
    public var description: String {
        switch stage {
        case .program:
            "cannot start \(program): \(errno)"
        case .workingDirectory:
            "cannot start \(program): working directory \(workingDirectory ?? "?"): \(errno)"
        case .invalidArgument:
            "cannot start \(program): an argument or environment entry contains a NUL byte or a bad name"
        case .tracking:
            "cannot track \(program) after starting it: \(errno)"
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

/// Starting commands with `posix_spawn`.
public enum Spawn {
    /// The search path used when `environment` has no PATH.
    public static let defaultSearchPath = "/usr/local/bin:/usr/bin:/bin"

    /// Starts `program` with `arguments` (argv[1...]; argv[0] is `program` as given) and exactly
    /// `environment`, in a new session and process group, with an empty signal mask and default
    /// signal dispositions, stdin from /dev/null, stdout and stderr both on `output` (typically
    /// a pipe's write end, which the caller closes after this returns), and no other open
    /// descriptors. A `program` without "/" is searched in the absolute directories of
    /// `environment["PATH"]` (default `defaultSearchPath`); one with "/" is used as is, and if
    /// relative, resolved in `workingDirectory`. Then opens a pidfd for the child.
    ///
    /// Safe to call from any thread. Throws `SpawnError` with the errno of the failure and what
    /// it concerned (the program or the working directory); nothing is left running then.
    ///
    /// The corresponding C functions are `posix_spawn` and `pidfd_open`.
    public static func run(
        program: String,
        arguments: [String] = [],
        environment: [String: String],
        workingDirectory: String? = nil,
        output: FileDescriptor
    ) throws(SpawnError) -> ChildProcess {
        func failure(_ stage: SpawnError.Stage, _ errno: Errno) -> SpawnError {
            SpawnError(stage: stage, errno: errno, program: program, workingDirectory: workingDirectory)
        }

        let argv = [program] + arguments
        let envp = environment.sorted { $0.key.utf8.lexicographicallyPrecedes($1.key.utf8) }
            .map { "\($0.key)=\($0.value)" }
        let hasNul = { (text: String) in text.utf8.contains(0) }
        if argv.contains(where: hasNul) || envp.contains(where: hasNul)
            || environment.keys.contains(where: { $0.isEmpty || $0.utf8.contains(UInt8(ascii: "=")) })
            || workingDirectory.map(hasNul) == true {
            throw failure(.invalidArgument, .invalidArgument)
        }

        let path: String
        do {
            path = try resolve(program, searchPath: environment["PATH"] ?? defaultSearchPath)
        } catch {
            throw failure(.program, error)
        }

        var pid: pid_t = 0
        let status = withCStringArray(argv) { argvPointer in
            withCStringArray(envp) { envpPointer in
                tsys_spawn(&pid, path, argvPointer, envpPointer, workingDirectory, output.rawValue)
            }
        }
        if status != 0 {
            // posix_spawn reports chdir and execve failures alike; blame the working directory
            // when it is not a searchable directory.
            if let workingDirectory, let error = checkDirectory(workingDirectory) {
                throw failure(.workingDirectory, error)
            }
            throw failure(.program, Errno(rawValue: status))
        }

        let pidfd = tsys_pidfd_open(pid)
        if pidfd == -1 {
            let error = Errno.current
            _ = Glibc.kill(pid, SIGKILL)
            _ = try? ProcessControl.waitExit(pid: pid, blocking: true)
            throw failure(.tracking, error)
        }
        return ChildProcess(pid: pid, pidfd: FileDescriptor(rawValue: pidfd))
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

    /// Why `path` cannot be a working directory, or nil if it can.
    private static func checkDirectory(_ path: String) -> Errno? {
        var info = stat()
        if stat(path, &info) == -1 {
            return .current
        }
        if info.st_mode & S_IFMT != S_IFDIR {
            return .notDirectory
        }
        return access(path, X_OK) == 0 ? nil : .current
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
