import Dispatch
import Glibc
import Synchronization
import Testing
import TimerdCLI
import TimerdCore
import TimerdProtocol
import TimerdSystem

/// The fixed "now" of the formatter tests.
let fixedNow = try! RFC3339.parse("2026-11-29T16:00:00Z")

/// Parses `arguments` and returns the request to send (fails the test if it is help or a usage error).
func request(_ arguments: [String], sourceLocation: SourceLocation = #_sourceLocation) throws -> Request {
    let command = try CommandParser.parse(arguments)
    return try #require(command.request, "expected a request for \(arguments)", sourceLocation: sourceLocation)
}

/// The usage error `arguments` give, or nil when they parse.
func usageError(_ arguments: [String]) -> UsageError? {
    do {
        _ = try CommandParser.parse(arguments)
        return nil
    } catch {
        return error
    }
}

/// What a `Timerctl.run` with a fake daemon printed and returned.
final class Transcript {
    var stdout = ""
    var stderr = ""
    var sent: [(request: Request, path: String)] = []
    var status: Int32 = -1
}

/// Runs timerctl with a fake transport that answers every request with `reply`; `systemZone` is the
/// local zone (UTC unless given, so that local times do not depend on the machine).
func runCLI(
    _ arguments: [String], environment: [String: String] = [:], userID: UInt32 = 1000,
    reply: Result<Reply, ClientError> = .success(.ok(nil)), systemZone: ZoneRules = .utc
) -> Transcript {
    let transcript = Transcript()
    let context = Timerctl.Context(
        environment: environment, userID: userID, now: { fixedNow },
        stdout: { transcript.stdout += $0 }, stderr: { transcript.stderr += $0 },
        send: { (request, path) throws(ClientError) in
            transcript.sent.append((request, path))
            return try reply.get()
        },
        systemZone: { systemZone })
    transcript.status = Timerctl.run(arguments: arguments, context: context)
    return transcript
}

/// A context for the verbs timerctl answers itself (`next`, `simulate`): now = `fixedNow`, output into
/// `transcript`, and a transport that records what it would send (those verbs must send nothing).
func offlineContext(_ transcript: Transcript, verb: String, systemZone: ZoneRules = .utc) -> Timerctl.Context {
    Timerctl.Context(
        environment: [:], userID: 1000, now: { fixedNow },
        stdout: { transcript.stdout += $0 }, stderr: { transcript.stderr += $0 },
        send: { (request, path) throws(ClientError) in
            transcript.sent.append((request, path))
            return .err(code: "internal", message: "\(verb) must not talk to timerd")
        },
        systemZone: { systemZone })
}

/// Runs timerctl with the real socket client and a capturing console.
func runCLIForReal(_ arguments: [String], environment: [String: String] = [:]) -> Transcript {
    let transcript = Transcript()
    var context = Timerctl.Context.system(environment: environment)
    context.now = { fixedNow }
    context.stdout = { transcript.stdout += $0 }
    context.stderr = { transcript.stderr += $0 }
    context.writeLine = { transcript.stdout += $0; return true }
    context.relay = { (request, path) throws(ClientError) in
        try DaemonClient.relay(request, to: path, timeout: DaemonClient.timeout(from: environment)) { bytes in
            transcript.stdout += String(decoding: bytes, as: UTF8.self)
            return true
        }
    }
    transcript.status = Timerctl.run(arguments: arguments, context: context)
    return transcript
}

/// A fresh directory under /tmp; `remove()` deletes it and the socket file in it.
struct TemporaryDirectory {
    let path: String

    init() throws {
        var template = Array("/tmp/timerctl-test-XXXXXX".utf8CString)
        let result = template.withUnsafeMutableBufferPointer { mkdtemp($0.baseAddress!) }
        guard let result else { throw Errno(rawValue: errno) }
        path = String(cString: result)
    }

    func remove() {
        _ = unlink(path + "/timerd.sock")
        _ = rmdir(path)
    }
}

/// A one-connection stand-in for timerd: accepts one client, reads its request line, then writes
/// `reply` (or, for nil, hangs up without replying).
final class FakeDaemon: Sendable {
    let directory: TemporaryDirectory
    let path: String
    private let listener: FileDescriptor
    private let received = Mutex<String?>(nil)
    private let done = DispatchSemaphore(value: 0)

    init(reply: String?) throws {
        directory = try TemporaryDirectory()
        path = directory.path + "/timerd.sock"
        listener = try UnixSocket.listen(path: path)
        DispatchQueue.global().async { [self] in
            defer { done.signal() }
            guard (try? listener.waitReadable(timeoutMilliseconds: 10_000)) == true,
                let connection = try? UnixSocket.accept(listener)
            else { return }
            defer { try? connection.close() }
            var bytes: [UInt8] = []
            reading: while !bytes.contains(UInt8(ascii: "\n")) {
                guard (try? connection.waitReadable(timeoutMilliseconds: 10_000)) == true else { break }
                do {
                    guard let chunk = try connection.tryRead(upToCount: 4096) else { continue }  // spurious wake-up
                    if chunk.isEmpty { break reading }
                    bytes += chunk
                } catch {
                    break reading
                }
            }
            received.withLock { $0 = String(decoding: bytes, as: UTF8.self) }
            if let reply {
                try? connection.setNonBlocking(false)
                // MSG_NOSIGNAL: a client that stops reading (RelayTests) must not kill the test process.
                let bytes = Array(reply.utf8)
                var offset = 0
                while offset < bytes.count {
                    let sent = bytes[offset...].withUnsafeBytes { Glibc.send(connection.rawValue, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
                    guard sent > 0 else { break }
                    offset += sent
                }
            }
        }
    }

    /// The request line the client sent (with its newline); waits for the connection to be served.
    func requestLine() -> String? {
        done.wait()
        done.signal()
        return received.withLock { $0 }
    }

    func stop() {
        _ = requestLine()
        try? listener.close()
        directory.remove()
    }
}
