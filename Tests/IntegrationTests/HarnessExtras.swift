import Foundation
import Glibc
import Testing

/// Small additions to the harness for the config-reload and robustness suites.
extension Daemon {
    /// Writes `text` to `relativePath` under the test directory (atomically: a reader never sees half a
    /// file), replacing `$DIR` by the test directory; creates parent directories as needed.
    func writeFile(_ relativePath: String, _ text: String) throws {
        let path = directory + "/" + relativePath
        let parent = (path as NSString).deletingLastPathComponent
        try FileManager.default.createDirectory(atPath: parent, withIntermediateDirectories: true)
        try text.replacingOccurrences(of: "$DIR", with: directory).write(toFile: path, atomically: true, encoding: .utf8)
    }

    /// Replaces the main config file (see ``writeFile(_:_:)``).
    func writeConfig(_ text: String) throws {
        try text.replacingOccurrences(of: "$DIR", with: directory).write(toFile: configPath, atomically: true, encoding: .utf8)
    }

    /// `RELOAD`, decoded. Throws with the reply if it is not `OK <json>`.
    func reload() throws -> ReloadReply {
        let reply = try request("RELOAD")
        guard reply.hasPrefix("OK ") else { throw HarnessError("RELOAD: \(reply)") }
        return try JSONDecoder().decode(ReloadReply.self, from: Data(reply.dropFirst(3).utf8))
    }

    /// `SHOW name`'s run counter.
    func runs(_ name: String) throws -> Int {
        guard let runs = try show(name)["runs"] as? Int else { throw HarnessError("SHOW \(name): no runs field") }
        return runs
    }

    /// `SHOW name`'s state (`scheduled`, `paused`, `finished`).
    func state(_ name: String) throws -> String? {
        try show(name)["state"] as? String
    }

    /// `SHOW name`'s `options`.
    func options(_ name: String) throws -> [String] {
        try show(name)["options"] as? [String] ?? []
    }

    /// The job names of `LIST`, in the order given.
    func listNames() throws -> [String] {
        let reply = try request("LIST")
        guard reply.hasPrefix("OK ") else { throw HarnessError("LIST: \(reply)") }
        let jobs = try JSONSerialization.jsonObject(with: Data(reply.dropFirst(3).utf8)) as? [[String: Any]] ?? []
        return jobs.compactMap { $0["name"] as? String }
    }

    /// Checks the daemon is still up and answering: the process runs and `PING` on a new connection is `OK`.
    func expectAlive(sourceLocation: SourceLocation = #_sourceLocation) {
        #expect(process.isRunning, "timerd exited; log:\n\(log)", sourceLocation: sourceLocation)
        #expect((try? request("PING")) == "OK", "PING after the test; log:\n\(log)", sourceLocation: sourceLocation)
    }

    /// Sends a signal to the daemon.
    func signal(_ signal: Int32) {
        kill(process.processIdentifier, signal)
    }
}

/// The `RELOAD` reply payload.
struct ReloadReply: Decodable, Equatable {
    var added: [String]
    var changed: [String]
    var removed: [String]
    var unchanged: Int
}

extension Client {
    /// Writes as much of `bytes` as the socket takes without blocking for long: keeps writing while the peer
    /// drains, and gives up once the socket has stayed full for `stallAfter` seconds (the peer stopped
    /// reading). Returns how many bytes were written. Leaves the socket non-blocking.
    func writeUntilStalled(_ bytes: [UInt8], stallAfter: Double = 0.5) -> Int {
        let flags = fcntl(fd, F_GETFL)
        _ = fcntl(fd, F_SETFL, flags | O_NONBLOCK)
        var offset = 0
        while offset < bytes.count {
            let n = bytes[offset...].withUnsafeBytes { Glibc.send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            if n > 0 {
                offset += n
                continue
            }
            guard n < 0, errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR else { break }
            var poller = pollfd(fd: fd, events: Int16(POLLOUT), revents: 0)
            if poll(&poller, 1, Int32(stallAfter * 1000)) == 0 { break }
        }
        return offset
    }

    /// Makes the socket blocking again (after ``writeUntilStalled(_:stallAfter:)``), for `readLine`.
    func setBlocking() {
        let flags = fcntl(fd, F_GETFL)
        _ = fcntl(fd, F_SETFL, flags & ~O_NONBLOCK)
    }
}

/// A lock-protected list of problems found on other threads, recorded as issues on the test's thread.
final class ProblemList: @unchecked Sendable {
    private let lock = NSLock()
    private var items: [String] = []

    func add(_ problem: String) {
        lock.lock()
        items.append(problem)
        lock.unlock()
    }

    var all: [String] {
        lock.lock()
        defer { lock.unlock() }
        return items
    }
}
