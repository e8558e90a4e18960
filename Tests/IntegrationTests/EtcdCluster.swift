import Foundation
import Glibc
import Testing

/// A real 3-member etcd cluster (/usr/bin/etcd, Debian's etcd-server) on 127.0.0.1 with free ports, its
/// data and logs in a temporary directory, for the etcd client's tests. Members are stopped and started by
/// PID; deinit kills them all and removes the directory (kept with TIMERD_TEST_KEEP=1).
final class EtcdCluster: @unchecked Sendable {
    static let binary = "/usr/bin/etcd"
    let directory: String
    /// One per member: `http://127.0.0.1:PORT`.
    let clientURLs: [String]
    let peerURLs: [String]
    private let token: String
    private var processes: [Process?]
    /// How long the first start took until every member reported healthy.
    private(set) var startDuration: Duration = .zero

    /// With `tls`: each member also serves `https://` (`tlsURLs`) with the CA's server certificate, and
    /// there requires a client certificate signed by the CA; `clientURLs` stay plain HTTP.
    let tls: ThrowawayCA?
    let tlsURLs: [String]

    init(members: Int = 3, tls: ThrowawayCA? = nil) throws {
        directory = try makeTemporaryDirectory()
        self.tls = tls
        var ports = Set<Int>()
        while ports.count < 3 * members { ports.insert(try unusedLoopbackPort()) }
        let list = Array(ports)
        clientURLs = (0..<members).map { "http://127.0.0.1:\(list[3 * $0])" }
        peerURLs = (0..<members).map { "http://127.0.0.1:\(list[3 * $0 + 1])" }
        tlsURLs = tls == nil ? [] : (0..<members).map { "https://127.0.0.1:\(list[3 * $0 + 2])" }
        token = "timerd-test-\(getpid())-\(UUID().uuidString)"
        processes = Array(repeating: nil, count: members)
        let clock = ContinuousClock()
        let started = clock.now
        for member in 0..<members { try launch(member) }
        let healthy = eventually(timeout: 30, "every etcd member to report healthy") {
            clientURLs.allSatisfy { Self.health($0) == true }
        }
        guard healthy else {
            let logs = (0..<members).map { "m\($0): \(log(member: $0).suffix(2_000))" }.joined(separator: "\n")
            stopAll()
            throw HarnessError("etcd cluster not healthy within 30 s; logs:\n\(logs)")
        }
        startDuration = clock.now - started
    }

    deinit {
        stopAll()
        if ProcessInfo.processInfo.environment["TIMERD_TEST_KEEP"] == nil {
            try? FileManager.default.removeItem(atPath: directory)
        }
    }

    private func name(_ member: Int) -> String { "m\(member)" }
    func logPath(member: Int) -> String { directory + "/\(name(member)).log" }
    func log(member: Int) -> String { (try? String(contentsOfFile: logPath(member: member), encoding: .utf8)) ?? "" }

    /// Starts member `member` on its data directory (created on the first start; a restart rejoins with it).
    private func launch(_ member: Int) throws {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: Self.binary)
        let cluster = peerURLs.indices.map { "\(name($0))=\(peerURLs[$0])" }.joined(separator: ",")
        process.arguments = [
            "--name", name(member), "--data-dir", directory + "/\(name(member)).data",
            "--listen-client-urls", clientURLs[member], "--advertise-client-urls", clientURLs[member],
            "--listen-peer-urls", peerURLs[member], "--initial-advertise-peer-urls", peerURLs[member],
            "--initial-cluster", cluster, "--initial-cluster-token", token, "--initial-cluster-state", "new",
        ]
        if let tls {
            let urls = clientURLs[member] + "," + tlsURLs[member]
            process.arguments! += [
                "--listen-client-urls", urls, "--advertise-client-urls", urls, "--client-cert-auth",
                "--cert-file", tls.serverCertificate, "--key-file", tls.serverKey, "--trusted-ca-file", tls.caCertificate,
            ]
        }
        // Only these flags: nothing from ETCD_* variables of the environment.
        process.environment = ProcessInfo.processInfo.environment.filter { !$0.key.hasPrefix("ETCD") }
        let path = logPath(member: member)
        if !FileManager.default.fileExists(atPath: path) { _ = FileManager.default.createFile(atPath: path, contents: nil) }
        guard let output = FileHandle(forWritingAtPath: path) else { throw HarnessError("cannot open \(path)") }
        output.seekToEndOfFile()
        process.standardOutput = output
        process.standardError = output
        process.standardInput = FileHandle.nullDevice
        do {
            try process.run()
        } catch {
            throw HarnessError("cannot run \(Self.binary) (Debian's etcd-server): \(error)")
        }
        try? output.close()
        processes[member] = process
    }

    /// Restarts a stopped member and waits until it answers `/health` (healthy or not: a member without a
    /// quorum answers, but unhealthy), at most `timeout` seconds.
    func start(member: Int, timeout: Double = 20) throws {
        precondition(processes[member]?.isRunning != true, "member \(member) is running")
        try launch(member)
        guard waitUntilListening(member: member, timeout: timeout) else {
            throw HarnessError("etcd member \(member) did not answer /health within \(timeout) s; log:\n\(log(member: member).suffix(2_000))")
        }
    }

    /// Whether member `member` answers `/health` (healthy or not) within `timeout` seconds.
    @discardableResult
    func waitUntilListening(member: Int, timeout: Double = 20) -> Bool {
        eventually(timeout: timeout, "etcd member \(member) to answer /health") { Self.health(clientURLs[member]) != nil }
    }

    /// Whether every running member reports healthy, waiting at most `timeout` seconds.
    @discardableResult
    func waitUntilHealthy(timeout: Double = 30) -> Bool {
        eventually(timeout: timeout, "the running etcd members to report healthy") {
            processes.indices.filter { processes[$0]?.isRunning == true }.allSatisfy { Self.health(clientURLs[$0]) == true }
        }
    }

    /// SIGTERM, and waits for the exit.
    func stop(member: Int) { signal(member: member, SIGTERM) }

    /// SIGKILL, and waits for the exit.
    func kill(member: Int) { signal(member: member, SIGKILL) }

    /// SIGSTOP (`frozen: true`) or SIGCONT: a member that hangs without closing its connections.
    func freeze(member: Int, _ frozen: Bool) {
        guard let process = processes[member], process.isRunning else { return }
        Glibc.kill(process.processIdentifier, frozen ? SIGSTOP : SIGCONT)
    }

    private func signal(member: Int, _ signal: Int32) {
        guard let process = processes[member] else { return }
        if process.isRunning {
            Glibc.kill(process.processIdentifier, signal)
            if !eventually(timeout: 30, "etcd member \(member) to exit", { !process.isRunning }) {
                Glibc.kill(process.processIdentifier, SIGKILL)
            }
        }
        process.waitUntilExit()
        processes[member] = nil
    }

    /// SIGKILL to every member (its data is thrown away). Not SIGTERM: a leader stopping gracefully first
    /// hands its leadership to a follower, and when that one is stopping too (or still catching up) it waits
    /// etcd's request timeout, 5 s + 2 election timeouts = 7 s (measured 7.0 s for SIGTERM to all at once).
    private func stopAll() {
        for member in processes.indices { kill(member: member) }
    }

    /// `GET /health` of one member: true/false as it reports, nil when it does not answer (within 1 s).
    static func health(_ url: String) -> Bool? {
        guard let reply = httpRequest(url, "GET /health HTTP/1.0\r\n\r\n") else { return nil }
        if reply.contains(#""health":"true""#) { return true }
        if reply.contains(#""health":"false""#) { return false }
        return nil
    }

    /// POSTs `json` to `path` on member `member` (for what the client has no call for, like compaction);
    /// the whole reply, headers included.
    func post(member: Int, _ path: String, _ json: String) -> String? {
        Self.httpRequest(clientURLs[member], "POST \(path) HTTP/1.0\r\nContent-Type: application/json\r\nContent-Length: \(json.utf8.count)\r\n\r\n\(json)")
    }

    /// One HTTP/1.0 exchange on a fresh connection (the server closes it after the reply); nil on failure.
    private static func httpRequest(_ url: String, _ request: String) -> String? {
        guard let port = UInt16(url.split(separator: ":").last ?? "") else { return nil }
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        var timeout = timeval(tv_sec: 1, tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = port.bigEndian
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard connected == 0 else { return nil }
        let bytes = Array(request.utf8)
        guard bytes.withUnsafeBytes({ send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }) == bytes.count else { return nil }
        var reply: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 4_096)
        while true {
            let n = chunk.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
            if n == 0 { break }
            guard n > 0 else { return nil }
            reply += chunk[..<n]
        }
        return String(decoding: reply, as: UTF8.self)
    }
}
