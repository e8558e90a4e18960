import Foundation
import Glibc
import Testing
import TimerdSystem

/// One scripted answer of ``WebhookServer`` for a path.
enum ServerReply: Sendable {
    /// Answer with this status, body and headers, after `delay` seconds.
    case respond(status: Int, body: String, delay: Double, headers: [String: String])
    /// Read and log the request, then never answer (the connection stays open until the server stops).
    case hang

    static func status(_ status: Int, body: String = "", delay: Double = 0, headers: [String: String] = [:]) -> ServerReply {
        .respond(status: status, body: body, delay: delay, headers: headers)
    }

    /// The form `webhook_server.py` reads.
    var json: Any {
        switch self {
        case .hang:
            return "hang"
        case .respond(let status, let body, let delay, let headers):
            return ["status": status, "body": body, "delay": delay, "headers": headers] as [String: Any]
        }
    }
}

/// The loopback HTTP(S) server of `webhook_server.py`, started for one test and stopped (by PID) when the
/// test lets go of it. Every request it receives is logged and can be read back with ``requests()``.
final class WebhookServer: @unchecked Sendable {
    /// One request as the server received it.
    struct Request: Decodable, Sendable {
        /// Wall-clock seconds since the epoch when the request had been read (before any scripted delay).
        var t: Double
        /// The server's monotonic clock at the same moment, for measuring gaps between requests.
        var mono: Double
        var method: String
        /// The request target: path and query.
        var path: String
        /// Header names in lower case; a repeated header's values are joined with ", ".
        var headers: [String: String]
        var body: String

        /// The path without its query.
        var pathOnly: String { String(path.prefix { $0 != "?" }) }

        /// The body decoded as a JSON object (nil if it is not one).
        func json() -> [String: Any]? {
            (try? JSONSerialization.jsonObject(with: Data(body.utf8))) as? [String: Any]
        }
    }

    /// `webhook_server.py`, next to this file in the source tree.
    static let scriptFile = (#filePath as NSString).deletingLastPathComponent + "/webhook_server.py"

    let directory: String
    let logPath: String
    let scriptPath: String
    let outputPath: String
    /// `http` or `https`.
    let scheme: String
    let port: Int
    private let child: ChildProcess
    private let lock = NSLock()
    private var stopped = false

    /// Starts the server with `script` (path → replies in order, the last one repeating; other paths
    /// answer 200 "ok"), serving HTTPS with `tls`'s server certificate when given.
    init(script: [String: [ServerReply]] = [:], tls: ThrowawayCA? = nil) throws {
        directory = try makeTemporaryDirectory()
        logPath = directory + "/requests.jsonl"
        scriptPath = directory + "/script.json"
        outputPath = directory + "/server.out"
        scheme = tls == nil ? "http" : "https"
        _ = FileManager.default.createFile(atPath: logPath, contents: Data())
        try Self.writeScript(script, to: scriptPath)

        var arguments = [Self.scriptFile, "--log", logPath, "--script", scriptPath]
        if let tls { arguments += ["--tls", tls.serverCertificate, tls.serverKey] }
        // stdout and stderr go to a file: no pipe for a reader to drain, nothing to block the server.
        let output: FileDescriptor
        do {
            output = try FileDescriptor.open(outputPath, .writeOnly, options: [.create, .truncate])
        } catch {
            throw HarnessError("open \(outputPath): \(error)")
        }
        do {
            child = try Spawn.run(program: "python3", arguments: arguments,
                                  environment: ProcessInfo.processInfo.environment, output: output)
        } catch {
            try? output.close()
            throw HarnessError("cannot start the webhook test server (python3 is required): \(error)")
        }
        try? output.close()

        // Wait for "PORT <n>" (or for the server to die).
        let deadline = Date().addingTimeInterval(20)
        var found: Int?
        while found == nil {
            let text = (try? String(contentsOfFile: outputPath, encoding: .utf8)) ?? ""
            if let line = text.split(separator: "\n").first(where: { $0.hasPrefix("PORT ") }) {
                found = Int(line.dropFirst(5).trimmingCharacters(in: .whitespaces))
                break
            }
            if Self.hasEnded(child) || Date() > deadline {
                Self.terminate(child)
                let output = (try? String(contentsOfFile: outputPath, encoding: .utf8)) ?? ""
                throw HarnessError("the webhook test server did not report its port; output:\n\(output)")
            }
            usleep(10_000)
        }
        guard let found else { throw HarnessError("the webhook test server reported a bad port") }
        port = found
    }

    deinit {
        stop()
        if ProcessInfo.processInfo.environment["TIMERD_TEST_KEEP"] == nil {
            try? FileManager.default.removeItem(atPath: directory)
        }
    }

    /// `scheme://127.0.0.1:port` + `path` (which starts with `/`).
    func url(_ path: String) -> String {
        "\(scheme)://127.0.0.1:\(port)\(path)"
    }

    /// Replaces the script; the server picks it up at its next request. What was used of a path so far
    /// stays used.
    func setScript(_ script: [String: [ServerReply]]) throws {
        try Self.writeScript(script, to: scriptPath)
    }

    /// Every request received so far, in arrival order.
    func requests() -> [Request] {
        guard let text = try? String(contentsOfFile: logPath, encoding: .utf8) else { return [] }
        // A line is complete once its newline is there; a last line without one is still being written.
        var lines = text.split(separator: "\n", omittingEmptySubsequences: false)
        lines.removeLast()
        let decoder = JSONDecoder()
        return lines.compactMap { try? decoder.decode(Request.self, from: Data($0.utf8)) }
    }

    /// The requests received so far for `path` (compared without the query).
    func requests(_ path: String) -> [Request] {
        requests().filter { $0.pathOnly == path }
    }

    /// Waits until at least `count` requests for `path` have arrived, and returns them all.
    @discardableResult
    func waitForRequests(_ path: String, count: Int = 1, timeout: Double = 15) -> [Request] {
        var found: [Request] = []
        eventually(timeout: timeout, "\(count) request(s) for \(path)") {
            found = requests(path)
            return found.count >= count
        }
        return found
    }

    /// What the server printed (its port, and TLS handshake failures).
    var output: String { (try? String(contentsOfFile: outputPath, encoding: .utf8)) ?? "" }

    /// Stops the server (SIGTERM, SIGKILL after 5 s) and reaps it. Idempotent.
    func stop() {
        lock.lock()
        defer { lock.unlock() }
        guard !stopped else { return }
        stopped = true
        Self.terminate(child)
    }

    /// Whether the child has ended (reaping it if so).
    private static func hasEnded(_ child: ChildProcess) -> Bool {
        do {
            return try child.waitExit() != nil
        } catch {
            return true  // ECHILD: already reaped
        }
    }

    /// Signals by pid, not through the pidfd: the child is not reaped until it has ended, so its pid
    /// cannot name another process, and a pidfd closed by mistake elsewhere in the test process once
    /// left the server running and this waiting for it forever (the rest of the run starved behind it).
    private static func terminate(_ child: ChildProcess) {
        if !hasEnded(child) {
            _ = try? ProcessControl.signalProcess(child.pid, .term)
            let deadline = Date().addingTimeInterval(5)
            var ended = false
            while !ended && Date() < deadline {
                usleep(10_000)
                ended = hasEnded(child)
            }
            if !ended {
                _ = try? ProcessControl.signalProcess(child.pid, .kill)
                _ = try? child.waitExit(blocking: true)
            }
        }
        try? child.pidfd.close()
    }

    private static func writeScript(_ script: [String: [ServerReply]], to path: String) throws {
        let object = script.mapValues { $0.map(\.json) }
        let data = try JSONSerialization.data(withJSONObject: object, options: [.sortedKeys])
        // Atomically (write and rename): the server never reads half a script.
        try data.write(to: URL(fileURLWithPath: path), options: .atomic)
    }
}

/// A certificate authority made with the `openssl` CLI in a temporary directory, for one test: its
/// certificate, and a server certificate for `127.0.0.1` and `localhost` (subjectAltName) signed by it.
final class ThrowawayCA: @unchecked Sendable {
    let directory: String
    /// The CA certificate (PEM): what a client trusts.
    let caCertificate: String
    /// The server certificate (PEM), for IP 127.0.0.1 and DNS localhost.
    let serverCertificate: String
    /// The server certificate's private key (PEM, unencrypted).
    let serverKey: String
    /// A client certificate (extendedKeyUsage clientAuth) and its key, when asked for.
    let clientCertificate: String
    let clientKey: String

    init(client: Bool = false) throws {
        directory = try makeTemporaryDirectory()
        caCertificate = directory + "/ca.pem"
        serverCertificate = directory + "/server.pem"
        serverKey = directory + "/server.key"
        clientCertificate = directory + "/client.pem"
        clientKey = directory + "/client.key"
        // Our own config: nothing depends on the system's openssl.cnf.
        try """
            [req]
            distinguished_name = dn
            prompt = no
            [dn]
            CN = timerd throwaway test CA
            [ca_ext]
            basicConstraints = critical,CA:TRUE
            keyUsage = critical,keyCertSign,cRLSign
            subjectKeyIdentifier = hash
            [server_ext]
            basicConstraints = critical,CA:FALSE
            keyUsage = critical,digitalSignature,keyEncipherment
            # clientAuth too: etcd's gateway dials its own TLS port with its server certificate.
            extendedKeyUsage = serverAuth,clientAuth
            subjectAltName = IP:127.0.0.1,DNS:localhost
            subjectKeyIdentifier = hash
            authorityKeyIdentifier = keyid
            [client_ext]
            basicConstraints = critical,CA:FALSE
            keyUsage = critical,digitalSignature,keyEncipherment
            extendedKeyUsage = clientAuth
            subjectKeyIdentifier = hash
            authorityKeyIdentifier = keyid

            """.write(toFile: directory + "/openssl.cnf", atomically: true, encoding: .utf8)
        let key = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
        try run(["req", "-x509", "-config", "openssl.cnf", "-extensions", "ca_ext"] + key
                + ["-keyout", "ca.key", "-out", "ca.pem", "-days", "2"])
        try run(["req", "-new", "-config", "openssl.cnf", "-subj", "/CN=127.0.0.1"] + key
                + ["-keyout", "server.key", "-out", "server.csr"])
        let serial = "0x" + (0..<8).map { _ in String(format: "%02x", UInt8.random(in: 0...255)) }.joined()
        try run(["x509", "-req", "-in", "server.csr", "-CA", "ca.pem", "-CAkey", "ca.key", "-set_serial", serial,
                 "-days", "2", "-extfile", "openssl.cnf", "-extensions", "server_ext", "-out", "server.pem"])
        guard client else { return }
        try run(["req", "-new", "-config", "openssl.cnf", "-subj", "/CN=timerd-node"] + key
                + ["-keyout", "client.key", "-out", "client.csr"])
        try run(["x509", "-req", "-in", "client.csr", "-CA", "ca.pem", "-CAkey", "ca.key", "-set_serial", serial + "1",
                 "-days", "2", "-extfile", "openssl.cnf", "-extensions", "client_ext", "-out", "client.pem"])
    }

    deinit {
        if ProcessInfo.processInfo.environment["TIMERD_TEST_KEEP"] == nil {
            try? FileManager.default.removeItem(atPath: directory)
        }
    }

    /// Runs `openssl arguments…` in the directory; throws with its output if it fails.
    private func run(_ arguments: [String]) throws {
        let outputPath = directory + "/openssl.out"
        let output: FileDescriptor
        do {
            output = try FileDescriptor.open(outputPath, .writeOnly, options: [.create, .truncate])
        } catch {
            throw HarnessError("open \(outputPath): \(error)")
        }
        let child: ChildProcess
        do {
            child = try Spawn.run(program: "openssl", arguments: arguments, environment: ProcessInfo.processInfo.environment,
                                  workingDirectory: directory, output: output)
        } catch {
            try? output.close()
            throw HarnessError("cannot run openssl (the openssl package is required): \(error)")
        }
        try? output.close()
        let status = try? child.waitExit(blocking: true)
        try? child.pidfd.close()
        guard status == .exited(0) else {
            let text = (try? String(contentsOfFile: outputPath, encoding: .utf8)) ?? ""
            throw HarnessError("openssl \(arguments.joined(separator: " ")): \(status.map(String.init(describing:)) ?? "?")\n\(text)")
        }
    }
}

/// A TCP port on 127.0.0.1 that nothing listens on: bound, read back, and closed again.
func unusedLoopbackPort() throws -> Int {
    let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    guard fd >= 0 else { throw HarnessError("socket: errno \(errno)") }
    defer { close(fd) }
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_port = 0
    address.sin_addr.s_addr = inet_addr("127.0.0.1")
    let bound = withUnsafePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
    }
    guard bound == 0 else { throw HarnessError("bind: errno \(errno)") }
    var length = socklen_t(MemoryLayout<sockaddr_in>.size)
    let named = withUnsafeMutablePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) }
    }
    guard named == 0 else { throw HarnessError("getsockname: errno \(errno)") }
    return Int(UInt16(bigEndian: address.sin_port))
}

/// How many threads process `pid` has now (entries of /proc/PID/task); 0 if it is gone.
func threadCount(of pid: Int32) -> Int {
    (try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/task").count) ?? 0
}
