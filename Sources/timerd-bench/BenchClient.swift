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
