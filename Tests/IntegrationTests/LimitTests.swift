import Foundation
import Glibc
import Testing

/// Every daemon limit produces its documented error and log line (`docs/security.md`). The per-user ones
/// are driven as a throwaway user (root has none of them), through a small Python client run with setpriv.
@Suite(.enabled(if: getuid() == 0, "needs root: creates a user with useradd"), .serialized)
struct LimitTests {
    /// Connects `connections` times to SOCKET, sends `lines` on the last connection (all at once), and prints
    /// the first line each connection receives (or EOF), then every reply to `lines`.
    static let client = """
        import socket, sys
        path, connections, lines = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
        socks = []
        for _ in range(connections):
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            s.connect(path)
            socks.append(s)
        last = socks[-1]
        if lines:
            last.sendall(("\\n".join(lines) + "\\n").encode())
            f = last.makefile("r")
            for _ in lines:
                print(f.readline().rstrip("\\n"), flush=True)
        else:
            for s in socks:
                s.settimeout(0.3)
                try:
                    data = s.recv(4096).decode()
                    print(data.rstrip("\\n") if data else "EOF", flush=True)
                except socket.timeout:
                    print("OPEN", flush=True)
        """

    let users: TestUsers

    init() throws {
        users = try TestUsers()
    }

    func daemon(_ settings: String) throws -> Daemon {
        let daemon = try Daemon(config: "[daemon]\nsocket_group = \(users.group)\n\(settings)\n")
        chmod(daemon.directory, 0o755)
        return daemon
    }

    func python(as user: String, _ daemon: Daemon, connections: Int, _ lines: [String] = []) throws -> [String] {
        let result = try users.run(as: user, "/usr/bin/python3", ["-c", Self.client, daemon.socket, String(connections)] + lines)
        guard result.status == 0 else { throw HarnessError("client failed: \(result.stderr)") }
        return result.stdout.split(separator: "\n", omittingEmptySubsequences: false).dropLast().map(String.init)
    }

    @Test func connectionsPerUserAndInTotal() throws {
        let daemon = try daemon("max_connections_per_user = 2\nmax_connections = 4")
        let replies = try python(as: users.alice, daemon, connections: 3)
        #expect(replies.prefix(2) == ["OPEN", "OPEN"])
        #expect(replies.last?.hasPrefix("ERR too-many-connections uid \(users.uid(users.alice)) has 2 connections open (max_connections_per_user)") == true, "\(replies)")
        #expect(eventually("the log line") { daemon.log.contains("refused a connection from uid \(users.uid(users.alice))") })
        // Root is not limited per user, but max_connections holds for everyone.
        let held = try (0..<4).map { _ in try Client(path: daemon.socket) }
        let fifth = try Client(path: daemon.socket)
        #expect(try fifth.readLine().hasPrefix("ERR too-many-connections timerd has 4 connections open (max_connections=4)"))
        withExtendedLifetime(held) {}
    }

    @Test func requestRatePerConnection() throws {
        let daemon = try daemon("max_request_rate = 5")
        let replies = try python(as: users.alice, daemon, connections: 1, Array(repeating: "PING", count: 20))
        #expect(replies.count == 20)
        #expect(replies.prefix(5).allSatisfy { $0 == "OK" }, "\(replies)")
        #expect(replies.contains { $0.hasPrefix("ERR rate-limited more than 5 requests per second on this connection (max_request_rate)") })
        #expect(eventually("the log line") { daemon.log.contains("more than 5 requests/s (max_request_rate); 1 refused so far") })
        // Root is trusted: no rate limit.
        let client = try Client(path: daemon.socket)
        try client.write(String(repeating: "PING\n", count: 20))
        #expect(try (0..<20).map { _ in try client.readLine() }.allSatisfy { $0 == "OK" })
    }

    @Test func idleConnectionsAreClosedButWatchersAndOwnersStay() throws {
        let daemon = try daemon("idle_timeout = 1s")
        let idle = try Client(path: daemon.socket)
        let watcher = try Client(path: daemon.socket)
        #expect(try watcher.request("WATCH").hasPrefix("OK"))
        let owner = try Client(path: daemon.socket)
        #expect(try owner.request("ADD mine every=1h owner=connection command=true") == "OK")
        // A blocking read: the daemon speaks first, after a second of silence.
        #expect(try idle.readLine() == "ERR idle-timeout no request for 1s (idle_timeout); closing")
        #expect(eventually("the log line") { daemon.log.contains("closed after 1s without a request (idle_timeout)") })
        // A connection opened after the owner's last request times out: by then the owner was idle longer.
        let later = try Client(path: daemon.socket)
        #expect(try later.readLine().hasPrefix("ERR idle-timeout"))
        #expect(try owner.request("SHOW mine").hasPrefix("OK"))
        #expect(try daemon.request("ADD tick in=10ms command=true") == "OK")
        #expect(try watcher.readLine().contains("\"event\":\"added\""))
    }

    @Test func userJobsAndOutputMemory() throws {
        let daemon = try daemon("user_max_jobs = 1\nmax_output_memory = 4K")
        let replies = try python(as: users.alice, daemon, connections: 1,
                                 ["ADD one every=1h command=true", "ADD two every=1h command=true"])
        #expect(replies.first == "OK")
        #expect(replies.last?.hasPrefix("ERR too-many-jobs uid \(users.uid(users.alice)) already has 1 job (user_max_jobs)") == true)
        // Two 3,000-byte outputs do not fit in 4 KiB: the older one is dropped from memory.
        for name in ["first", "second"] {
            #expect(try daemon.request("ADD \(name) every=1h command=\"printf %3000s | tr ' ' x\"") == "OK")
            #expect(try daemon.request("RUN \(name)").hasPrefix("OK"))
            #expect(try eventually("\(name)'s output") { (try daemon.show(name)["last_output"] as? String)?.count == 3000 })
        }
        #expect((try daemon.show("first")["last_output"] as? String)?.hasPrefix("[output no longer held in memory") == true)
        #expect(daemon.logShows("max_output_memory (4096 bytes) reached: dropped the held output of first"))
        let history = try daemon.request("HISTORY first")
        #expect(history.contains(String(repeating: "x", count: 3000)), "the history keeps it")
    }
}
