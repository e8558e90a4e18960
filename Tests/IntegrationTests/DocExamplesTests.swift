import Foundation
import Glibc
import Testing
import TimerdTestSupport

/// What the docs show is what timerd does: every example of `README.md`, `docs/*.md` and the man pages'
/// EXAMPLES (`DocExample`) runs against a real daemon, and its output must be what the doc shows (times,
/// durations, pids and paths normalised, `DocOutput`). A change that alters an output fails here until the
/// doc follows it.
///
/// The examples of one file run in order against one daemon (a later one may use a job an earlier one
/// added), unless one asks for a new one. The daemon runs with everything outside its directory
/// read-only (`Daemon(readOnlySystem:)`): the examples' jobs are the docs' (`tar … /var/backups`), not
/// the test's, and must not change the host when they fire.
@Suite("The docs' examples", .serialized)
struct DocExamplesTests {
    static let root: String = {
        var url = URL(fileURLWithPath: #filePath)
        for _ in 0..<3 { url.deleteLastPathComponent() }
        return url.path
    }()

    /// The files with examples, relative to the repository.
    static let files: [String] = {
        let docs = (try? FileManager.default.contentsOfDirectory(atPath: root + "/docs")) ?? []
        return ["README.md"] + docs.filter { $0.hasSuffix(".md") }.sorted().map { "docs/" + $0 }
            + ["man/timerctl.1", "man/timerd.8", "man/timerd.conf.5"]
    }()

    static func examples(in file: String) throws -> [DocExample] {
        let text = try String(contentsOfFile: root + "/" + file, encoding: .utf8)
        return file.hasPrefix("man/") ? try DocExample.manPage(text, file: file) : try DocExample.markdown(text, file: file)
    }

    @Test(arguments: files) func theExamplesShowWhatTimerdDoes(_ file: String) throws {
        let examples = try Self.examples(in: file)
        let session = DocSession(file: file)
        for example in examples {
            if let reason = example.notChecked {
                print("\(example): not checked: \(reason)")
                continue
            }
            try session.run(example)
        }
    }

    @Test func everyFileHasItsExamplesFoundAndMostAreChecked() throws {
        var total = 0, unchecked = 0
        for file in Self.files {
            // A man page's commands other than timerctl's are not examples to check here.
            let examples = try Self.examples(in: file).filter { !($0.notChecked ?? "").hasPrefix(DocExample.notTimerctl) }
            total += examples.count
            unchecked += examples.filter { $0.notChecked != nil }.count
        }
        print("doc examples: \(total), of which \(total - unchecked) checked")
        #expect(total >= 50)
        #expect(unchecked * 4 <= total, "\(unchecked) of \(total) examples are not checked")
    }

    @Test func theComparisonCatchesWhatChangedAndIgnoresWhatVaries() {
        func same(_ expected: [String], _ actual: [String], exact: Bool = false) -> Bool {
            DocOutput.matches(expected.map { DocOutput.normalise($0, exact: exact) }, actual.map { DocOutput.normalise($0, exact: exact) })
        }
        #expect(same(["backup  scheduled  every 5m  in 4m53s  6s ago  ok"], ["backup scheduled every 5m in 4m59s 1s ago ok"]))
        #expect(!same(["backup  scheduled  every 5m  in 4m53s  6s ago  ok"], ["backup paused every 5m in 4m59s 1s ago ok"]))
        #expect(same(["started:   2026-11-29T16:27:44.127195Z (1s ago)"], ["started:   2026-12-02T08:00:01.000001Z (3ms ago)"]))
        #expect(!same(["2026-03-29T03:00:00+02:00"], ["2026-03-29T02:00:00+02:00"], exact: true))
        #expect(same(["OK {…\"name\":\"backup\",…}"], ["OK {\"a\":1,\"name\":\"backup\",\"z\":2}"]))
        #expect(same(["a", "…", "d"], ["a", "b", "c", "d"]) && same(["a", "…"], ["a"]))
        #expect(!same(["a", "…", "d"], ["a", "b", "c"]))
        #expect(!same(["pong"], ["pong", "extra"]))
    }
}

/// Runs one file's examples, in order, against its daemon.
final class DocSession {
    static let docSocket = "/run/timerd/timerd.sock"
    static let docConfig = "/etc/timerd/timerd.conf"
    let file: String
    private var daemon: Daemon?

    init(file: String) { self.file = file }

    deinit { daemon?.stop() }

    func run(_ example: DocExample) throws {
        if daemon == nil || example.fresh || example.noDaemon {
            daemon?.stop()
            daemon = nil
            daemon = try Daemon(config: example.config ?? "", readOnlySystem: true)
        }
        let daemon = daemon!
        if example.noDaemon {
            // Its socket is gone with it: what a user sees when timerd is not running.
            daemon.stop()
            self.daemon = nil
        }
        for command in example.setup { try setUp(command, daemon, example) }
        var streams = 0
        for step in example.steps {
            if step.command.hasPrefix("socat - UNIX-CONNECT:") {
                try converse(step, daemon)
                continue
            }
            if let name = step.command.wholeMatch(of: /cat (\S+)/)?.1, let expected = step.expected,
               !FileManager.default.fileExists(atPath: daemon.directory + "/" + name) {
                // The doc shows the file: that is what it holds.
                try (expected.joined(separator: "\n") + "\n").write(toFile: daemon.directory + "/" + name, atomically: true, encoding: .utf8)
            }
            // A stream (`timerctl watch`, shown ending in `^C` or not) is interrupted once it printed what the
            // doc shows, after the `during:` commands.
            let streaming = step.command.hasPrefix("timerctl watch")
            let expected = step.expected.map { $0.last == "^C" ? Array($0.dropLast()) : $0 }
            let during = streaming && streams < example.during.count ? example.during[streams] : []
            if streaming { streams += 1 }
            let result = try execute(step.command, daemon, example, streamLines: streaming ? expected?.count ?? 0 : nil, during: during)
            guard let expected else {
                #expect(result.status == 0, "\(file):\(step.line): \(step.command) failed (\(result.status)):\n\(result.output)")
                continue
            }
            compare(expected, result.output, step, varies: example.varies)
        }
    }

    private func compare(_ expected: [String], _ output: String, _ step: DocExample.Step, varies: [NSRegularExpression] = []) {
        let exact = DocOutput.isExact(step.command)
        var actual = output.components(separatedBy: "\n")
        if actual.last == "" { actual.removeLast() }
        let want = expected.map { DocOutput.normalise($0, exact: exact, varies: varies) }
        let got = actual.map { DocOutput.normalise($0, exact: exact, varies: varies) }
        #expect(DocOutput.matches(want, got), """
            \(file):\(step.line): $ \(step.command)
            --- the doc shows:
            \(expected.joined(separator: "\n"))
            --- timerd gave:
            \(actual.joined(separator: "\n"))
            --- normalised, the doc / timerd:
            \(want.joined(separator: "\n"))
            /
            \(got.joined(separator: "\n"))
            """)
    }

    /// A setup command: the harness's own `await JOB KEY=VALUE…` (waits until `SHOW JOB` has each key at
    /// that value, as JSON writes it; `KEY!=VALUE`: at another), or a shell command that must succeed.
    private func setUp(_ command: String, _ daemon: Daemon, _ example: DocExample) throws {
        let words = command.split(separator: " ").map(String.init)
        if words.first == "await", words.count >= 3 {
            let name = words[1]
            let wanted = words.dropFirst(2).map { $0.split(separator: "=", maxSplits: 1).map(String.init) }
            _ = eventually(timeout: 20, "\(example): \(command)") {
                guard let reply = try? daemon.request("SHOW \(name)"), reply.hasPrefix("OK ") else { return false }
                return wanted.allSatisfy { pair in
                    guard pair.count == 2 else { return false }
                    let negated = pair[0].hasSuffix("!")
                    return reply.contains("\"\(pair[0].dropLast(negated ? 1 : 0))\":\(pair[1])") != negated
                }
            }
            return
        }
        let result = try execute(command, daemon, example)
        #expect(result.status == 0, "\(example): setup '\(command)' failed (\(result.status)): \(result.output)")
    }

    /// `socat - UNIX-CONNECT:…`: its lines are requests, each followed by the reply the doc shows.
    private func converse(_ step: DocExample.Step, _ daemon: Daemon) throws {
        let client = try Client(path: daemon.socket)
        var request: String?
        for line in step.expected ?? [] {
            if line.hasPrefix("OK") || line.hasPrefix("ERR") {
                guard let sent = request else { Issue.record("\(file):\(step.line): a reply with no request: \(line)"); continue }
                let reply = unmap(try client.request(mapPaths(sent, daemon)), daemon)
                compare([line], reply, DocExample.Step(command: sent, expected: [line], line: step.line))
                request = nil
            } else {
                request = line
            }
        }
    }

    /// Runs `command` in the daemon's directory with `sh`, output (stdout and stderr, as a terminal shows
    /// them) to a file. With `streamLines`, the `during:` commands run once it is watching, and it gets
    /// SIGINT (Ctrl-C) once it printed that many lines (or after 10 s); otherwise it must end within 30 s.
    /// Started through `timerd-test-helper exec`, so that signals reach it.
    private func execute(_ command: String, _ daemon: Daemon, _ example: DocExample, streamLines: Int? = nil,
                         during: [String] = []) throws -> (status: Int32, output: String) {
        // Its own file: a `during:` command runs while a stream writes to its.
        let out = daemon.directory + "/.example-output-\(UUID().uuidString.prefix(8))"
        let process = Process()
        process.executableURL = URL(fileURLWithPath: try TestBinaries.helper())
        // A stream is exec'd, so that SIGINT reaches it and not the shell.
        process.arguments = ["exec", "/bin/sh", "-c", #"cd "$0" && exec >"$1" 2>&1 && "# + (streamLines == nil ? "" : "exec ")
                             + mapPaths(command, daemon), daemon.directory, out]
        process.environment = environment(daemon)
        process.standardInput = FileHandle.nullDevice
        try process.run()
        defer { if process.isRunning { kill(process.processIdentifier, SIGKILL) } }
        let output = { self.unmap((try? String(contentsOfFile: out, encoding: .utf8)) ?? "", daemon) }
        if let streamLines {
            // It is watching once timerd counts its connection.
            _ = eventually(timeout: 10, "\(example): \(command) to connect") {
                ((try? daemon.request("STATS")) ?? "").contains("\"watchers\":1")
            }
            for command in during { try setUp(command, daemon, example) }
            _ = eventually(timeout: 10, "\(example): \(command) to print \(streamLines) lines") {
                output().split(separator: "\n").count >= streamLines
            }
            kill(process.processIdentifier, SIGINT)
        }
        if !eventually(timeout: 30, "\(example): \(command) to end", { !process.isRunning }) { kill(process.processIdentifier, SIGKILL) }
        process.waitUntilExit()
        return (process.terminationStatus, output())
    }

    private func environment(_ daemon: Daemon) -> [String: String] {
        let bin = (try? Daemon.binary("timerctl")).map { ($0 as NSString).deletingLastPathComponent } ?? ""
        return ["PATH": bin + ":/usr/bin:/bin", "TIMERD_SOCKET": daemon.socket, "HOME": daemon.directory, "TZ": "UTC", "LANG": "C.UTF-8"]
    }

    /// The doc's paths, as this daemon has them.
    private func mapPaths(_ text: String, _ daemon: Daemon) -> String {
        text.replacingOccurrences(of: Self.docSocket, with: daemon.socket)
            .replacingOccurrences(of: Self.docConfig, with: daemon.configPath)
    }

    /// This daemon's paths, as the doc shows them.
    private func unmap(_ text: String, _ daemon: Daemon) -> String {
        text.replacingOccurrences(of: daemon.socket, with: Self.docSocket)
            .replacingOccurrences(of: daemon.configPath, with: Self.docConfig)
            .replacingOccurrences(of: daemon.directory + "/", with: "")
    }
}
