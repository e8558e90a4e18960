import TimerdProtocol
import TimerdSystem

/// Why a request got no usable reply from timerd (exit status 3).
package enum ClientError: Error, Equatable, Sendable {
    /// No connection: no socket file, no server, no permission, path too long.
    case cannotConnect(path: String, SocketError)
    /// Sending the request failed (the daemon went away).
    case sendFailed(path: String, Errno)
    /// Reading the reply failed.
    case receiveFailed(path: String, Errno)
    /// The daemon closed the connection before a whole reply line.
    case closedWithoutReply(path: String)
    /// The reply line was not `OK…`/`ERR…`, or was too long.
    case badReply(path: String, String)
    /// No reply within the timeout (`TIMERCTL_TIMEOUT`, default 30 s): timerd is wedged or overloaded.
    case timedOut(path: String, seconds: Double)

    /// The stderr text, `timerctl: ` prefixed, ending in a newline; says which socket and how to start timerd.
    package var message: String {
        switch self {
        case .cannotConnect(let path, let error):
            let reason: String
            if case .pathTooLong(_, let limit) = error {
                reason = "the path is longer than \(limit) bytes"
            } else {
                reason = error.errno.map(\.description) ?? error.description
            }
            var text = "timerctl: cannot connect to \(path): \(reason)\n"
            if error.errno == .permissionDenied {
                text += "  The socket belongs to another user: run timerctl as that user, or point it at your own"
                text += " timerd with --socket PATH or TIMERD_SOCKET.\n"
            } else {
                text += "  Is timerd running? Start it with 'systemctl start timerd' or 'timerd --socket \(path)',"
                text += " or point timerctl at its socket with --socket PATH or TIMERD_SOCKET.\n"
            }
            return text
        case .sendFailed(let path, let errno):
            return "timerctl: cannot send the request to timerd on \(path): \(errno)\n"
        case .receiveFailed(let path, let errno):
            return "timerctl: cannot read timerd's reply on \(path): \(errno)\n"
        case .closedWithoutReply(let path):
            return "timerctl: timerd on \(path) closed the connection without replying (is it shutting down?)\n"
        case .badReply(let path, let why):
            return "timerctl: bad reply from timerd on \(path): \(why)\n"
        case .timedOut(let path, let seconds):
            let shown = seconds == seconds.rounded() ? String(Int(seconds)) : String(seconds)
            return "timerctl: timerd on \(path) did not answer within \(shown)s (set TIMERCTL_TIMEOUT to wait longer)\n"
        }
    }
}

/// One request, one reply, over a fresh blocking connection to the control socket.
package enum DaemonClient {
    /// Replies longer than this are refused: a bound on what a daemon gone wrong can make timerctl hold,
    /// well above a `LIST` of 100,000 jobs (about 65 MB; 64 MiB was the bound before, and it was reached).
    static let maxReplyBytes = 1 << 30

    /// How long to wait for a reply unless `TIMERCTL_TIMEOUT` says otherwise.
    package static let defaultTimeout = 30.0

    /// The timeout in `TIMERCTL_TIMEOUT` (seconds, > 0), else ``defaultTimeout``.
    package static func timeout(from environment: [String: String]) -> Double {
        guard let text = environment["TIMERCTL_TIMEOUT"], let value = Double(text), value > 0, value.isFinite else {
            return defaultTimeout
        }
        return value
    }

    /// Connects to `path`, writes `request` and a newline, reads up to the first newline and parses it.
    /// Waits at most `timeout` seconds for the reply.
    ///
    /// - Throws: ``ClientError``.
    package static func send(_ request: Request, to path: String, timeout: Double = defaultTimeout) throws(ClientError) -> Reply {
        try exchange(request, to: path, timeout: timeout, maxLineBytes: maxReplyBytes, streaming: false) { _ in false }
    }

    /// Longest event line accepted on a `WATCH` stream.
    static let maxEventBytes = 1 << 20

    /// Connects to `path`, writes `request`, reads the reply line (waiting at most `timeout` seconds
    /// for it) and returns it. After an `OK` reply the connection is a stream of event lines: each is
    /// passed to `onLine` (without its newline), waiting for them as long as it takes, until timerd
    /// closes the connection or `onLine` returns false. After an `ERR` reply `onLine` is not called.
    ///
    /// - Throws: ``ClientError`` when there is no connection or no valid reply, or reading the stream
    ///   fails. A reset connection after the reply counts as timerd closing the stream.
    @discardableResult
    package static func stream(
        _ request: Request, to path: String, timeout: Double = defaultTimeout, onLine: (String) -> Bool
    ) throws(ClientError) -> Reply {
        try exchange(request, to: path, timeout: timeout, maxLineBytes: maxEventBytes, streaming: true, onLine: onLine)
    }

    /// What ``relay(_:to:timeout:write:)`` did with the reply.
    package enum Relayed: Equatable, Sendable {
        /// An `OK` reply's payload went to `write` as it arrived, its newline included.
        case payload
        /// Any other reply (an `ERR`, an `OK` without a payload), read whole.
        case reply(Reply)
    }

    /// Sends `request` and hands an `OK` reply's payload to `write` as it arrives, chunk by chunk, up to
    /// and including the reply's newline: a `LIST` of 100,000 jobs (80 MB) is neither held nor copied,
    /// and its first jobs are printed while timerd still describes the rest. `write` returning false
    /// (stdout gone) ends it early. Any other reply is read whole, as ``send(_:to:timeout:)`` does. Waits
    /// at most `timeout` seconds for each chunk.
    ///
    /// - Throws: ``ClientError``; `.badReply` when the connection closes in the middle of a payload
    ///   already partly written.
    package static func relay(
        _ request: Request, to path: String, timeout: Double = defaultTimeout, write: ([UInt8]) -> Bool
    ) throws(ClientError) -> Relayed {
        let socket = try open(request, to: path)
        defer { try? socket.close() }
        // Before the kind of reply is known: its first bytes.
        var head: [UInt8] = []
        // An `OK` payload being relayed.
        var relaying = false
        // Any other reply, read whole.
        var framer: LineFramer?
        var relayed = 0
        /// Hands `bytes` on up to the first newline; true when the payload is complete or nobody reads.
        func pass(_ bytes: ArraySlice<UInt8>) -> Bool {
            guard !bytes.isEmpty else { return false }
            let newline = bytes.withUnsafeBufferPointer { LineFramer.firstNewline(in: $0) }.map { bytes.startIndex + $0 }
            let end = newline.map { $0 + 1 } ?? bytes.endIndex
            relayed += end - bytes.startIndex
            return !write(Array(bytes[..<end])) || newline != nil
        }
        while true {
            var chunk = try receive(socket, path: path, timeout: timeout, upToCount: 1 << 20)
            let closed = chunk.isEmpty
            if relaying {
                if closed { throw .badReply(path: path, "the reply ended after \(relayed) bytes, before its end of line") }
                if pass(chunk[...]) { return .payload }
                continue
            }
            if framer == nil {
                head += chunk
                // `OK ` and a payload, or anything else: three bytes or a whole line tell.
                if !closed, head.count < 3, !head.contains(UInt8(ascii: "\n")) { continue }
                if head.starts(with: "OK ".utf8) {
                    relaying = true
                    if pass(head[3...]) { return .payload }
                    continue
                }
                framer = LineFramer(maxLineBytes: maxReplyBytes)
                chunk = head
            }
            var lines = framer!.append(chunk)
            // At the end a last line without its newline still counts.
            if lines.isEmpty, closed { lines = framer!.finish().map { [FramedLine.line($0)] } ?? [] }
            if let first = lines.first {
                guard case .line(let line) = first else { throw .badReply(path: path, "reply longer than \(maxReplyBytes) bytes") }
                return .reply(try parse(line, path: path))
            }
            if closed { throw .closedWithoutReply(path: path) }
        }
    }

    /// A connection to `path` with `request` written to it.
    private static func open(_ request: Request, to path: String) throws(ClientError) -> FileDescriptor {
        let socket: FileDescriptor
        do {
            socket = try UnixSocket.connect(path: path)
        } catch {
            throw .cannotConnect(path: path, error)
        }
        do {
            try socket.writeAll(request.encode() + "\n")
        } catch {
            try? socket.close()
            throw .sendFailed(path: path, error)
        }
        return socket
    }

    /// The next bytes from `socket`, waiting at most `timeout` seconds for them (nil: as long as it takes);
    /// empty when timerd closed or reset the connection.
    private static func receive(
        _ socket: FileDescriptor, path: String, timeout: Double?, upToCount count: Int
    ) throws(ClientError) -> [UInt8] {
        let milliseconds = timeout.map { Int32(min($0 * 1000, Double(Int32.max)).rounded(.up)) } ?? -1
        let readable: Bool
        do {
            readable = try socket.waitReadable(timeoutMilliseconds: milliseconds)
        } catch {
            throw .receiveFailed(path: path, error)
        }
        guard readable else { throw .timedOut(path: path, seconds: timeout ?? 0) }
        do {
            return try socket.read(upToCount: count)
        } catch .connectionReset {
            return []
        } catch {
            throw .receiveFailed(path: path, error)
        }
    }

    /// One request and its reply; when `streaming`, then the event lines that follow an `OK` (see `stream`).
    private static func exchange(
        _ request: Request, to path: String, timeout: Double, maxLineBytes: Int, streaming: Bool,
        onLine: (String) -> Bool
    ) throws(ClientError) -> Reply {
        let socket = try open(request, to: path)
        defer { try? socket.close() }
        var framer = LineFramer(maxLineBytes: maxLineBytes)
        var reply: Reply?
        while true {
            // The timeout is for the reply only; events may be hours apart.
            let chunk = try receive(socket, path: path, timeout: reply == nil ? timeout : nil, upToCount: 65536)
            let closed = chunk.isEmpty
            // At the end a last line without its newline still counts.
            let lines = closed ? framer.finish().map { [FramedLine.line($0)] } ?? [] : framer.append(chunk)
            for framed in lines {
                guard case .line(let line) = framed else {
                    throw .badReply(path: path, "\(reply == nil ? "reply" : "event") longer than \(maxLineBytes) bytes")
                }
                guard let current = reply else {
                    let first = try parse(line, path: path)
                    reply = first
                    guard streaming, case .ok = first else { return first }
                    continue
                }
                if !onLine(String(decoding: line, as: UTF8.self)) { return current }
            }
            if closed {
                guard let reply else { throw .closedWithoutReply(path: path) }
                return reply
            }
        }
    }

    private static func parse(_ line: [UInt8], path: String) throws(ClientError) -> Reply {
        do {
            return try Reply.parse(line: line)
        } catch {
            throw .badReply(path: path, error.message)
        }
    }
}
