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
        /// Sends a streaming request (`WATCH`) to the socket at the given path, passes each line after
        /// the reply to the callback until it returns false or timerd closes, and returns the reply
        /// (see ``DaemonClient/stream(_:to:timeout:onLine:)``).
        package var stream: (Request, String, (String) -> Bool) throws(ClientError) -> Reply
        /// Sends one request whose `OK` payload is printed as received (`--json`): the payload goes to
        /// stdout as it arrives, with its newline (see ``DaemonClient/relay(_:to:timeout:write:)``).
        package var relay: (Request, String) throws(ClientError) -> DaemonClient.Relayed
        /// Writes a streamed line to stdout; false when stdout is gone (e.g. a closed pipe).
        package var writeLine: (String) -> Bool
        /// The zone `next` computes in when given no `--timezone`, and `history` prints its times in.
        package var systemZone: () -> ZoneRules
        /// Whether a socket file exists at the path (to pick the default socket of a user other than root).
        package var socketExists: (String) -> Bool

        /// Without `stream`, a streaming request gets its reply from `send` and no events; without
        /// `relay`, a payload comes whole from `send` and goes to `stdout`; without `writeLine`, lines go
        /// to `stdout`; without `systemZone`, it is the machine's (`TZ`, `/etc/localtime`).
        package init(
            environment: [String: String], userID: UInt32, now: @escaping () -> WallTime,
            stdout: @escaping (String) -> Void, stderr: @escaping (String) -> Void,
            send: @escaping (Request, String) throws(ClientError) -> Reply,
            stream: ((Request, String, (String) -> Bool) throws(ClientError) -> Reply)? = nil,
            relay: ((Request, String) throws(ClientError) -> DaemonClient.Relayed)? = nil,
            writeLine: ((String) -> Bool)? = nil,
            systemZone: @escaping () -> ZoneRules = { SystemTimeZones.systemZone() },
            socketExists: @escaping (String) -> Bool = { _ in false }
        ) {
            self.socketExists = socketExists
            self.environment = environment
            self.userID = userID
            self.now = now
            self.stdout = stdout
            self.stderr = stderr
            self.send = send
            self.systemZone = systemZone
            if let stream {
                self.stream = stream
            } else {
                self.stream = { (request, path, _) throws(ClientError) in try send(request, path) }
            }
            if let relay {
                self.relay = relay
            } else {
                self.relay = { (request, path) throws(ClientError) in
                    let reply = try send(request, path)
                    guard case .ok(let payload?) = reply else { return .reply(reply) }
                    stdout(payload + "\n")
                    return .payload
                }
            }
            if let writeLine {
                self.writeLine = writeLine
            } else {
                self.writeLine = { stdout($0); return true }
            }
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
                },
                stream: { (request, path, onLine) throws(ClientError) in
                    try DaemonClient.stream(request, to: path, timeout: DaemonClient.timeout(from: environment), onLine: onLine)
                },
                relay: { (request, path) throws(ClientError) in
                    try DaemonClient.relay(request, to: path, timeout: DaemonClient.timeout(from: environment)) { bytes in
                        (try? FileDescriptor.standardOutput.writeAll(bytes)) != nil
                    }
                },
                writeLine: { (try? FileDescriptor.standardOutput.writeAll($0)) != nil },
                socketExists: FileSystem.isSocket)
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
        case .next(let options):
            return next(options, command: command, context: context)
        case .simulate(let options):
            return SimulateCommand.run(options, json: command.output == .json, context: context)
        case .importCrontab(let path, let options):
            return ImportCommand.run(path: path, options, context: context)
        case .importSystemd(let units, let options):
            return ImportCommand.runSystemd(units: units, options, context: context)
        case .refuse(let error):
            let rendered = ReplyFormatter.render(Reply(error), for: command, now: context.now())
            context.stderr(rendered.stderr)
            return rendered.status
        case .send(let control):
            let request = control.request
            if command.verb == .version, command.output == .text { context.stdout(ReplyFormatter.clientVersionLine) }
            let path = SocketPath.resolve(
                flag: command.socket, environment: context.environment, userID: context.userID, socketExists: context.socketExists)
            if command.verb == .watch { return watch(request, path: path, command: command, context: context) }
            let reply: Reply
            do {
                if command.output == .json, command.verb != .version {
                    // Printed as received: passed on as it arrives instead of held whole.
                    guard case .reply(let other) = try context.relay(request, path) else { return ExitStatus.success }
                    reply = other
                } else {
                    reply = try context.send(request, path)
                }
            } catch {
                context.stderr(error.message)
                return ExitStatus.unreachable
            }
            let rendered = ReplyFormatter.render(reply, for: command, now: context.now(), localZone: context.systemZone)
            if !rendered.stdout.isEmpty { context.stdout(rendered.stdout) }
            if !rendered.stderr.isEmpty { context.stderr(rendered.stderr) }
            return rendered.status
        }
    }

    /// `next`: the fire times, computed here with the daemon's `NextFireQuery` and the tz database, printed
    /// as timerd's `NEXT` reply would be. A value timerd would refuse (a bad expression, an unknown zone, no
    /// fire time at all) is printed as its `ERR` would be, with the same status.
    private static func next(_ options: [Option], command: Command, context: Context) -> Int32 {
        let reply: Reply
        do throws(TimerdError) {
            let query = try NextFireQuery(options: options.map { KeyValue($0.key, $0.value) })
            let zone = try query.timezone.map { name throws(TimerdError) in try SystemTimeZones.zone(named: name) } ?? context.systemZone()
            let times = try query.times(now: context.now(), zone: zone)
            reply = .ok(Payload.encode(NextTimes(timezone: zone.name, times: times.map { RFC3339.format($0, in: zone) })))
        } catch {
            reply = .err(code: error.code.rawValue, message: error.message)
        }
        let rendered = ReplyFormatter.render(reply, for: command, now: context.now())
        if !rendered.stdout.isEmpty { context.stdout(rendered.stdout) }
        if !rendered.stderr.isEmpty { context.stderr(rendered.stderr) }
        return rendered.status
    }

    /// `watch`: prints each event line (verbatim with `--json`) until timerd closes the stream (a note
    /// on stderr, status 0) or stdout goes away (status 0, nothing more); an `ERR` reply is status 1.
    private static func watch(_ request: Request, path: String, command: Command, context: Context) -> Int32 {
        var lastLine: String?
        var stdoutGone = false
        let reply: Reply
        do {
            reply = try context.stream(request, path) { line in
                lastLine = line
                let text = command.output == .json ? line + "\n" : WatchText.line(line)
                stdoutGone = !context.writeLine(text)
                return !stdoutGone
            }
        } catch {
            context.stderr(error.message)
            return ExitStatus.unreachable
        }
        if case .err = reply {
            let rendered = ReplyFormatter.render(reply, for: command, now: context.now())
            context.stderr(rendered.stderr)
            return rendered.status
        }
        if !stdoutGone { context.stderr(WatchText.closedNote(lastLine: lastLine)) }
        return ExitStatus.success
    }
}
