import TimerdCore
import TimerdProtocol
import TimerdSystem

/// The `timerctl` program: parse, talk to timerd, print, return the exit status.
package enum Timerctl {
    /// Everything ``run(arguments:context:)`` touches outside itself, so tests can replace it.
    package struct Context {
        package var environment: [String: String]
        package var userID: UInt32
        package var now: () -> WallTime
        package var stdout: (String) -> Void
        package var stderr: (String) -> Void
        /// Sends one request to the socket at the given path and returns the reply.
        package var send: (Request, String) throws(ClientError) -> Reply

        package init(
            environment: [String: String], userID: UInt32, now: @escaping () -> WallTime,
            stdout: @escaping (String) -> Void, stderr: @escaping (String) -> Void,
            send: @escaping (Request, String) throws(ClientError) -> Reply
        ) {
            self.environment = environment
            self.userID = userID
            self.now = now
            self.stdout = stdout
            self.stderr = stderr
            self.send = send
        }

        /// The real process: its uid, the wall clock, fds 1 and 2, and ``DaemonClient``.
        package static func system(environment: [String: String]) -> Context {
            Context(
                environment: environment, userID: CurrentProcess.userID,
                now: {
                    let (seconds, nanoseconds) = SystemClock.wallClockNow()
                    return WallTime(seconds: seconds, nanoseconds: Int64(nanoseconds))
                },
                stdout: { try? FileDescriptor.standardOutput.writeAll($0) },
                stderr: { CurrentProcess.writeToStderr($0) },
                send: { (request, path) throws(ClientError) in
                    try DaemonClient.send(request, to: path, timeout: DaemonClient.timeout(from: environment))
                })
        }
    }

    /// The entry point of the executable: ignores SIGPIPE (a daemon that hangs up must give an error,
    /// not kill timerctl) and runs with the process's environment and real I/O.
    package static func main(arguments: [String]) -> Int32 {
        try? Signals.ignore(.pipe)
        return run(arguments: arguments, environment: CurrentProcess.environment())
    }

    /// Runs one command line (without the program name) with real I/O; returns the exit status.
    package static func run(arguments: [String], environment: [String: String]) -> Int32 {
        run(arguments: arguments, context: .system(environment: environment))
    }

    /// Runs one command line with the given context; returns the exit status (see ``ExitStatus``).
    package static func run(arguments: [String], context: Context) -> Int32 {
        let command: Command
        do {
            command = try CommandParser.parse(arguments)
        } catch {
            context.stderr(HelpText.usageError(error))
            return ExitStatus.usage
        }
        switch command.action {
        case .help(let verb):
            context.stdout(verb.map(HelpText.verb) ?? HelpText.global())
            return ExitStatus.success
        case .send(let request):
            if command.verb == .version, command.output == .text { context.stdout(ReplyFormatter.clientVersionLine) }
            let path = SocketPath.resolve(flag: command.socket, environment: context.environment, userID: context.userID)
            let reply: Reply
            do {
                reply = try context.send(request, path)
            } catch {
                context.stderr(error.message)
                return ExitStatus.unreachable
            }
            let rendered = ReplyFormatter.render(reply, for: command, now: context.now())
            if !rendered.stdout.isEmpty { context.stdout(rendered.stdout) }
            if !rendered.stderr.isEmpty { context.stderr(rendered.stderr) }
            return rendered.status
        }
    }
}
