import Testing
import TimerdCLI
import TimerdProtocol

@Suite("socket resolution and the connection to timerd")
struct ConnectionTests {
    @Test("socket resolution order", arguments: [
        ("/flag.sock", ["TIMERD_SOCKET": "/env.sock", "XDG_RUNTIME_DIR": "/run/user/1000"], 1000, "/flag.sock"),
        (nil, ["TIMERD_SOCKET": "/env.sock", "XDG_RUNTIME_DIR": "/run/user/1000"], 1000, "/env.sock"),
        (nil, ["TIMERD_SOCKET": "/env.sock"], 0, "/env.sock"),
        (nil, ["XDG_RUNTIME_DIR": "/run/user/1000"], 0, "/run/timerd/timerd.sock"),
        (nil, ["XDG_RUNTIME_DIR": "/run/user/1000"], 1000, "/run/user/1000/timerd/timerd.sock"),
        (nil, [:], 1000, "/tmp/timerd-1000/timerd.sock"),
        (nil, ["TIMERD_SOCKET": "", "XDG_RUNTIME_DIR": ""], 1000, "/tmp/timerd-1000/timerd.sock"),
    ] as [(String?, [String: String], UInt32, String)])
    func resolution(flag: String?, environment: [String: String], userID: UInt32, path: String) {
        #expect(SocketPath.resolve(flag: flag, environment: environment, userID: userID, socketExists: { _ in false }) == path)
    }

    @Test("a user without a daemon of their own uses the system daemon's socket when it exists")
    func systemSocketForOtherUsers() {
        let user = ["XDG_RUNTIME_DIR": "/run/user/1000"]
        let own = "/run/user/1000/timerd/timerd.sock"
        #expect(SocketPath.resolve(flag: nil, environment: user, userID: 1000, socketExists: { $0 == SocketPath.system }) == SocketPath.system)
        #expect(SocketPath.resolve(flag: nil, environment: user, userID: 1000, socketExists: { _ in true }) == own)
        #expect(SocketPath.resolve(flag: nil, environment: [:], userID: 1000, socketExists: { $0 == SocketPath.system }) == SocketPath.system)
        #expect(SocketPath.resolve(flag: nil, environment: user, userID: 1000, socketExists: { _ in false }) == own)
    }

    @Test func runSendsToTheResolvedSocket() {
        #expect(runCLI(["ping"], environment: ["TIMERD_SOCKET": "/env.sock"]).sent.map(\.path) == ["/env.sock"])
        #expect(runCLI(["--socket", "/flag.sock", "ping"], environment: ["TIMERD_SOCKET": "/env.sock"]).sent.map(\.path) == ["/flag.sock"])
        #expect(runCLI(["ping"], userID: 0).sent.map(\.path) == ["/run/timerd/timerd.sock"])
    }

    @Test func missingSocketExitsThreeNamingThePath() throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let path = directory.path + "/timerd.sock"
        let result = runCLIForReal(["--socket", path, "list"])
        #expect(result.status == 3)
        #expect(result.stdout == "")
        #expect(result.stderr == """
            timerctl: cannot connect to \(path): No such file or directory (ENOENT)
              Is timerd running? Start it with 'systemctl start timerd' or 'timerd --socket \(path)', \
            or point timerctl at its socket with --socket PATH or TIMERD_SOCKET.

            """)
        // The environment variable is honoured the same way.
        let viaEnvironment = runCLIForReal(["ping"], environment: ["TIMERD_SOCKET": path])
        #expect(viaEnvironment.status == 3)
        #expect(viaEnvironment.stderr.hasPrefix("timerctl: cannot connect to \(path): "))
    }

    @Test func tooLongSocketPathExitsThree() {
        let path = "/tmp/" + String(repeating: "x", count: 200)
        let result = runCLIForReal(["--socket", path, "ping"])
        #expect(result.status == 3)
        #expect(result.stderr.hasPrefix("timerctl: cannot connect to \(path): the path is longer than 107 bytes\n"))
    }

    @Test func requestAndReplyGoOverTheSocket() throws {
        let daemon = try FakeDaemon(reply: "OK {\"status\":\"started\"}\n")
        defer { daemon.stop() }
        let result = runCLIForReal(["--socket", daemon.path, "run", "backup"])
        #expect(result.status == 0)
        #expect(result.stdout == "started\n")
        #expect(daemon.requestLine() == "RUN backup\n")
    }

    @Test func quotedWordsReachTheDaemonAsOneLine() throws {
        let daemon = try FakeDaemon(reply: "OK\n")
        defer { daemon.stop() }
        let result = runCLIForReal(["--socket=\(daemon.path)", "add", "x", "--in", "1s", "--", "printf", "%s\n", "a b"])
        #expect(result.status == 0)
        let line = try #require(daemon.requestLine())
        #expect(line == "ADD x in=1s -- printf \"%s\\n\" 'a b'\n")
        #expect(try Request.parse(line) == Request(
            verb: .add, positionals: ["x"], options: [Option(key: "in", value: "1s")], argv: ["printf", "%s\n", "a b"]))
    }

    @Test func daemonErrorExitsOne() throws {
        let daemon = try FakeDaemon(reply: "ERR no-such-job no job named nope\n")
        defer { daemon.stop() }
        let result = runCLIForReal(["--socket", daemon.path, "show", "nope"])
        #expect(result.status == 1)
        #expect(result.stderr == "timerctl: no job named nope (no-such-job)\n")
    }

    @Test func hangUpWithoutReplyExitsThree() throws {
        let daemon = try FakeDaemon(reply: nil)
        defer { daemon.stop() }
        let result = runCLIForReal(["--socket", daemon.path, "ping"])
        #expect(result.status == 3)
        #expect(result.stderr == "timerctl: timerd on \(daemon.path) closed the connection without replying (is it shutting down?)\n")
    }

    @Test func lastReplyLineWithoutNewlineIsAccepted() throws {
        let daemon = try FakeDaemon(reply: "OK")
        defer { daemon.stop() }
        #expect(runCLIForReal(["--socket", daemon.path, "ping"]).stdout == "pong\n")
    }

    @Test func malformedReplyExitsThree() throws {
        let daemon = try FakeDaemon(reply: "HELLO there\n")
        defer { daemon.stop() }
        let result = runCLIForReal(["--socket", daemon.path, "ping"])
        #expect(result.status == 3)
        #expect(result.stderr.hasPrefix("timerctl: bad reply from timerd on \(daemon.path): malformed reply"))
    }
}
