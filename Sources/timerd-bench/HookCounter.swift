import Foundation
import TimerdSystem

/// The cluster scenario's webhook target: a loopback HTTP/1.1 server on one thread (poll over
/// non-blocking sockets, keep-alive) that answers every request `200` at once and records, for each, the
/// job and the scheduled instant from the body timerd sends by default (`{"fired_at":…,"job":"NAME",…,
/// "scheduled_at":"2026-11-29T16:05:00.000000Z"}`, docs/webhooks.md) and when it arrived. Counting at the
/// target is what lets the scenario see fires delivered twice.
final class HookCounter: Sendable {
    struct Delivery: Sendable {
        var job: String
        /// The fire's due instant and the request's arrival, wall-clock ns since the epoch.
        var scheduledNs: Int64
        var receivedNs: Int64
    }

    let port: Int
    private let listener: Int32
    private let wake: (read: Int32, write: Int32)
    private let deliveries = LockedBox<[Delivery]>([])
    /// Requests whose body had no job or no scheduled instant (answered 200 all the same).
    let malformed = LockedBox(0)
    private let finished = DispatchSemaphore(value: 0)

    init() throws {
        let (fd, port) = try boundLoopbackSocket(nonBlocking: true)
        guard listen(fd, 1024) == 0 else {
            close(fd)
            throw BenchError("the webhook target cannot listen on loopback: errno \(errno)")
        }
        var ends: [Int32] = [0, 0]
        guard pipe(&ends) == 0, ends.allSatisfy(Self.setCloseOnExecNonBlocking) else {
            close(fd)
            throw BenchError("pipe: errno \(errno)")
        }
        listener = fd
        wake = (ends[0], ends[1])
        self.port = port
        Thread.detachNewThread { [self] in serve() }
    }

    /// Everything received so far.
    var received: [Delivery] { deliveries.get() }

    /// Ends the server thread and closes every socket.
    func stop() {
        _ = write(wake.write, "x", 1)
        finished.wait()
        close(wake.write)
    }

    private struct Connection {
        var input: [UInt8] = []
        var output: [UInt8] = []
        /// Answered `100 Continue` for the request at the start of `input`.
        var continued = false
        var closing = false
    }

    /// (accept4 and pipe2 are GNU extensions a plain `import Glibc` hides.)
    private static func setCloseOnExecNonBlocking(_ fd: Int32) -> Bool {
        fcntl(fd, F_SETFD, FD_CLOEXEC) == 0 && fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK) == 0
    }

    private static let ok = Array("HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 3\r\n\r\nok\n".utf8)
    private static let headerEnd: [UInt8] = Array("\r\n\r\n".utf8)

    private func serve() {
        var connections: [Int32: Connection] = [:]
        var chunk = [UInt8](repeating: 0, count: 1 << 16)
        defer {
            for fd in connections.keys { close(fd) }
            close(listener)
            close(wake.read)
            finished.signal()
        }
        while true {
            let order = Array(connections.keys)
            var polled = [pollfd(fd: wake.read, events: Int16(POLLIN), revents: 0), pollfd(fd: listener, events: Int16(POLLIN), revents: 0)]
            polled += order.map { pollfd(fd: $0, events: Int16(POLLIN) | (connections[$0]!.output.isEmpty ? 0 : Int16(POLLOUT)), revents: 0) }
            guard poll(&polled, nfds_t(polled.count), -1) >= 0 || errno == EINTR else { return }
            if polled[0].revents != 0 { return }
            if polled[1].revents != 0 {
                while true {
                    let fd = accept(listener, nil, nil)
                    if fd < 0 { break }
                    guard Self.setCloseOnExecNonBlocking(fd) else {
                        close(fd)
                        continue
                    }
                    connections[fd] = Connection()
                }
            }
            var batch: [Delivery] = []
            for (index, fd) in order.enumerated() where polled[index + 2].revents != 0 {
                var connection = connections[fd]!
                var open = true
                if polled[index + 2].revents & Int16(POLLIN | POLLHUP | POLLERR) != 0 {
                    while true {
                        let count = chunk.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
                        if count > 0 {
                            connection.input += chunk[..<count]
                            continue
                        }
                        if count == 0 || (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) { open = false }
                        if count < 0 && errno == EINTR { continue }
                        break
                    }
                    parse(&connection, into: &batch)
                }
                if !connection.output.isEmpty {
                    let sent = connection.output.withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
                    if sent > 0 {
                        connection.output.removeFirst(sent)
                    } else if sent < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR {
                        open = false
                    }
                }
                if !open || (connection.closing && connection.output.isEmpty) {
                    close(fd)
                    connections[fd] = nil
                } else {
                    connections[fd] = connection
                }
            }
            if !batch.isEmpty { deliveries.update { $0 += batch } }
        }
    }

    /// Takes every complete request off the front of `connection.input`, records it and queues its answer.
    private func parse(_ connection: inout Connection, into batch: inout [Delivery]) {
        var start = 0
        let input = connection.input
        while let end = Self.find(Self.headerEnd, in: input, from: start) {
            let head = String(decoding: input[start..<end], as: UTF8.self).lowercased()
            var length = 0
            var expectsContinue = false
            for line in head.split(separator: "\r\n") {
                if line.hasPrefix("content-length:") { length = Int(line.dropFirst(15).trimmingCharacters(in: .whitespaces)) ?? 0 }
                if line.hasPrefix("expect:") && line.contains("100-continue") { expectsContinue = true }
                if line.hasPrefix("connection:") && line.contains("close") { connection.closing = true }
            }
            let bodyStart = end + 4
            guard input.count - bodyStart >= length else {
                if expectsContinue && !connection.continued {
                    connection.output += Array("HTTP/1.1 100 Continue\r\n\r\n".utf8)
                    connection.continued = true
                }
                break
            }
            let body = String(decoding: input[bodyStart..<(bodyStart + length)], as: UTF8.self)
            if let job = Self.field("job", in: body), let at = Self.field("scheduled_at", in: body), let scheduled = Self.nanoseconds(rfc3339: at) {
                let now = SystemClock.wallClockNow()
                batch.append(Delivery(job: job, scheduledNs: scheduled, receivedNs: now.seconds * 1_000_000_000 + Int64(now.nanoseconds)))
            } else {
                malformed.update { $0 += 1 }
            }
            connection.output += Self.ok
            connection.continued = false
            start = bodyStart + length
        }
        if start > 0 { connection.input.removeFirst(start) }
    }

    private static func find(_ needle: [UInt8], in haystack: [UInt8], from start: Int) -> Int? {
        guard haystack.count >= needle.count else { return nil }
        var index = start
        while index + needle.count <= haystack.count {
            if haystack[index] == needle[0] && haystack[index..<(index + needle.count)].elementsEqual(needle) { return index }
            index += 1
        }
        return nil
    }

    /// The string value of `"key":"…"` in a flat JSON text (job names and times need no escaping).
    static func field(_ key: String, in json: String) -> String? {
        guard let range = json.range(of: "\"\(key)\":\"") else { return nil }
        let rest = json[range.upperBound...]
        guard let close = rest.firstIndex(of: "\"") else { return nil }
        return String(rest[..<close])
    }

    /// `2026-11-29T16:05:00.000000Z` (UTC, any number of fraction digits) as ns since the epoch.
    static func nanoseconds(rfc3339 text: String) -> Int64? {
        let bytes = Array(text.utf8)
        guard bytes.count >= 20, bytes.last == UInt8(ascii: "Z") else { return nil }
        func number(_ from: Int, _ count: Int) -> Int? {
            var value = 0
            for byte in bytes[from..<(from + count)] {
                guard byte >= 48, byte <= 57 else { return nil }
                value = value * 10 + Int(byte - 48)
            }
            return value
        }
        guard let year = number(0, 4), let month = number(5, 2), let day = number(8, 2), let hour = number(11, 2),
              let minute = number(14, 2), let second = number(17, 2) else { return nil }
        var fraction: Int64 = 0
        if bytes[19] == UInt8(ascii: ".") {
            let digits = bytes.count - 21
            guard digits > 0, digits <= 9, let value = number(20, digits) else { return nil }
            fraction = Int64(value) * Int64(pow(10, Double(9 - digits)))
        }
        // Days since the epoch of a proleptic Gregorian date (Howard Hinnant's days_from_civil).
        let y = month <= 2 ? year - 1 : year
        let era = (y >= 0 ? y : y - 399) / 400
        let yearOfEra = y - era * 400
        let dayOfYear = (153 * (month + (month > 2 ? -3 : 9)) + 2) / 5 + day - 1
        let dayOfEra = yearOfEra * 365 + yearOfEra / 4 - yearOfEra / 100 + dayOfYear
        let days = era * 146_097 + dayOfEra - 719_468
        let seconds = Int64(days) * 86_400 + Int64(hour * 3_600 + minute * 60 + second)
        return seconds * 1_000_000_000 + fraction
    }
}
