import Foundation
import TimerdSystem

/// A blocking client of the control socket for one thread: requests, pipelined requests, and reading
/// replies of any length (a `LIST` of 100,000 jobs is one line of tens of megabytes).
final class BenchClient {
    let fd: FileDescriptor
    private var buffer: [UInt8] = []
    private var start = 0
    /// Where the search for the next newline resumes, so a long line is scanned once.
    private var scanned = 0

    init(socket: String) throws {
        fd = try UnixSocket.connect(path: socket)
    }

    deinit { try? fd.close() }

    func send(_ text: String) throws {
        try fd.writeAll(text)
    }

    func request(_ line: String) throws -> String {
        try send(line + "\n")
        guard let reply = try readLine() else { throw BenchError("timerd closed the connection after \(line)") }
        return reply
    }

    /// Like `request`, and also how long the first bytes of the reply took (seconds).
    func requestTimingFirstByte(_ line: String) throws -> (reply: String, firstByte: Double) {
        let start = Measure.now()
        try send(line + "\n")
        let chunk = try fd.read(upToCount: 1 << 20)
        let firstByte = Measure.seconds(since: start)
        buffer.append(contentsOf: chunk)
        guard let reply = try readLine() else { throw BenchError("timerd closed the connection after \(line)") }
        return (reply, firstByte)
    }

    /// The next line without its newline; nil at end of stream.
    func readLine() throws -> String? {
        while true {
            if let newline = buffer[scanned...].firstIndex(of: 10) {
                let line = String(decoding: buffer[start..<newline], as: UTF8.self)
                start = newline + 1
                scanned = start
                if start > 1 << 20 || start == buffer.count {
                    buffer.removeSubrange(0..<start)
                    start = 0
                    scanned = 0
                }
                return line
            }
            scanned = buffer.count
            let chunk = try fd.read(upToCount: 1 << 20)
            if chunk.isEmpty { return nil }
            buffer.append(contentsOf: chunk)
        }
    }

    /// Sends every line from another thread while this one reads the replies, so neither side's socket
    /// buffer can fill and stall the other. Returns the replies that were not `OK`.
    func pipeline(_ lines: [String], batch: Int = 512) throws -> [String] {
        let writer = fd
        let done = DispatchSemaphore(value: 0)
        let failure = LockedBox<String?>(nil)
        Thread.detachNewThread {
            var index = 0
            while index < lines.count {
                let end = min(index + batch, lines.count)
                let text = lines[index..<end].joined(separator: "\n") + "\n"
                do { try writer.writeAll(text) } catch {
                    failure.set("write: \(error)")
                    break
                }
                index = end
            }
            done.signal()
        }
        var errors: [String] = []
        for _ in lines.indices {
            guard let reply = try readLine() else { throw BenchError("timerd closed the connection while pipelining") }
            if reply != "OK" { errors.append(reply) }
        }
        done.wait()
        if let message = failure.get() { throw BenchError(message) }
        return errors
    }
}

/// A value shared between threads under a lock.
final class LockedBox<Value: Sendable>: @unchecked Sendable {
    private let lock = NSLock()
    private var value: Value

    init(_ value: Value) { self.value = value }

    func get() -> Value { lock.withLock { value } }
    func set(_ newValue: Value) { lock.withLock { value = newValue } }
    func update<R>(_ body: (inout Value) -> R) -> R { lock.withLock { body(&value) } }
}

struct BenchError: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
}

/// Pipelined requests over several connections from this one thread (poll over non-blocking sockets),
/// so the client takes one core at most and the daemon's threads get the rest: with a thread per
/// connection and another per writer, 32 client threads on 2 cores measured the client as much as the
/// daemon (40,000 `ADD`s/s where a single-threaded client got 55,000).
enum MultiplexedPipeline {
    private struct Connection {
        let fd: FileDescriptor
        let request: [UInt8]
        var sent = 0
        let expected: Int
        var answered = 0
        var partial: [UInt8] = []
    }

    /// Sends each share's lines on a connection of its own, reading replies as they come; returns the
    /// replies that were not `OK`.
    static func run(socket: String, shares: [[String]]) throws -> [String] {
        var connections = try shares.map { lines in
            let fd = try UnixSocket.connect(path: socket)
            try fd.setNonBlocking()
            return Connection(fd: fd, request: Array((lines.joined(separator: "\n") + "\n").utf8), expected: lines.count)
        }
        defer { for connection in connections { try? connection.fd.close() } }
        var errors: [String] = []
        var buffer = [UInt8](repeating: 0, count: 1 << 16)
        while connections.contains(where: { $0.answered < $0.expected }) {
            var polled = connections.map { connection in
                pollfd(fd: connection.fd.rawValue,
                       events: Int16(POLLIN) | (connection.sent < connection.request.count ? Int16(POLLOUT) : 0), revents: 0)
            }
            guard poll(&polled, nfds_t(polled.count), 60_000) > 0 else { throw BenchError("no reply from timerd for 60 s") }
            for index in connections.indices where polled[index].revents != 0 {
                if polled[index].revents & Int16(POLLOUT) != 0 {
                    let chunk = connections[index].request[connections[index].sent...].prefix(1 << 16)
                    if let written = try connections[index].fd.tryWrite(chunk) { connections[index].sent += written }
                }
                guard polled[index].revents & Int16(POLLIN | POLLHUP | POLLERR) != 0 else { continue }
                guard let count = try buffer.withUnsafeMutableBytes({ raw in try connections[index].fd.tryRead(into: raw) }) else {
                    continue  // nothing after all
                }
                if count == 0 { throw BenchError("timerd closed a connection while pipelining") }
                var start = 0
                for offset in 0..<count where buffer[offset] == 10 {
                    connections[index].partial.append(contentsOf: buffer[start..<offset])
                    if connections[index].partial != [79, 75] {  // "OK"
                        errors.append(String(decoding: connections[index].partial, as: UTF8.self))
                    }
                    connections[index].partial.removeAll(keepingCapacity: true)
                    connections[index].answered += 1
                    start = offset + 1
                }
                connections[index].partial.append(contentsOf: buffer[start..<count])
            }
        }
        return errors
    }
}
