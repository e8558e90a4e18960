import Testing
import TimerdConfig
import TimerdCore

@Suite("Config format: lines, comments, continuations, encodings")
struct FormatTests {
    @Test func goodFileGivesSpecsAndSettings() throws {
        let text = """
            # a comment
            ; another comment
               # an indented comment

            [daemon]
            socket = timerd.sock
            max_running = 8
            stop_grace = 1m30s

            [job "hello"]
            every = 5s
            command = echo hello

            [job "tool"]
            in = 250ms
            argv = /usr/bin/printf '%s\\n' "a b"
            env = A=1
            env = B=two words
            meta = owner=ops
            timeout = 2s
            kill_grace = 1s
            overlap = replace
            cwd = /tmp
            """
        let config = try #require(configuration(text))
        #expect(config.settings == DaemonSettings(socket: "/etc/timerd/timerd.sock", maxRunning: 8, stopGrace: .seconds(90)))
        #expect(config.files == [mainPath])
        #expect(config.jobs.map(\.spec.name.rawValue) == ["hello", "tool"])
        #expect(config.jobs.map(\.line) == [10, 14])
        #expect(config.jobs.map(\.file) == [mainPath, mainPath])
        #expect(config.jobs[0].spec == (try spec("hello", [("every", "5s"), ("command", "echo hello")])))
        let tool = config.jobs[1].spec
        #expect(tool.schedule == .after(delay: .milliseconds(250)))
        #expect(tool.action == .argv(["/usr/bin/printf", "%s\\n", "a b"]))
        #expect(tool.env == [KeyValue("A", "1"), KeyValue("B", "two words")])
        #expect(tool.meta == [KeyValue("owner", "ops")])
        #expect(tool.timeout == .seconds(2))
        #expect(tool.killGrace == .seconds(1))
        #expect(tool.overlap == .replace)
        #expect(tool.cwd == "/tmp")
        #expect(config.job(named: try JobName("tool"))?.location == "\(mainPath):14")
    }

    @Test func emptyFileGivesDefaults() throws {
        let config = try #require(configuration("# nothing here\n\n"))
        #expect(config.settings == .defaults)
        #expect(config.settings.maxRunning == Limits.defaultMaxRunning)
        #expect(config.settings.stopGrace == Limits.defaultStopGrace)
        #expect(config.settings.socket == nil)
        #expect(config.jobs.isEmpty)
        #expect(Configuration.empty == Configuration(settings: .defaults, jobs: [], files: []))
    }

    @Test func valuesKeepSemicolonsHashesAndQuotes() throws {
        let text = """
            [job "a"]
            every = 1s
            command =   date ; echo hi # not a comment; "quoted 'too'"\t
            """
        let config = try #require(configuration(text))
        #expect(config.jobs[0].spec.action == .shell("date ; echo hi # not a comment; \"quoted 'too'\""))
    }

    @Test func valueIsEverythingAfterTheFirstEquals() throws {
        let config = try #require(configuration("[job \"a\"]\nevery=1s\ncommand=test a=b && echo x==y\nenv=X=a=b\n"))
        #expect(config.jobs[0].spec.action == .shell("test a=b && echo x==y"))
        #expect(config.jobs[0].spec.env == [KeyValue("X", "a=b")])
    }

    @Test func longLinesAreNotTruncated() throws {
        let long = "echo " + String(repeating: "x", count: 5_000)
        let config = try #require(configuration("[job \"a\"]\nevery = 1s\ncommand = \(long)\n"))
        #expect(config.jobs[0].spec.action == .shell(long))
    }

    @Test func continuationJoinsWithOneSpace() throws {
        let text = """
            [job "a"]
            every = 1s
            command = echo one ; \\
            echo two\\
              three
            overlap = queue
            """
        let config = try #require(configuration(text))
        #expect(config.jobs[0].spec.action == .shell("echo one ;  echo two   three"))
        #expect(config.jobs[0].spec.overlap == .queue)
    }

    @Test func continuedValueErrorsPointAtItsFirstLineAndLaterLinesKeepTheirNumbers() {
        let text = """
            [job "a"]
            every = 5 \\
              parsecs
            command = true
            timeout = \\
            never
            """
        #expect(problems(text) == [
            at(2, "every: invalid duration \"5    parsecs\": unknown unit \"parsecs\" (examples: 250ms, 5s, 1m30s, 2h, 1d, 5min)"),
            at(5, "timeout: invalid duration \"never\": expected a number (examples: 250ms, 5s, 1m30s, 2h, 1d, 5min)"),
        ])
    }

    @Test func continuationPastEndOfFile() {
        #expect(problems("[job \"a\"]\nevery = 1s\ncommand = echo \\") == [
            at(3, "the last line ends in a backslash, continuing past the end of the file")
        ])
        // The value itself is kept, so nothing else is reported about the job.
        #expect(problems("[job \"a\"]\nevery = 1s\ncommand = echo \\\n") == [
            at(3, "the last line ends in a backslash, continuing past the end of the file")
        ])
    }

    @Test func aCommentLineDoesNotContinue() throws {
        let config = try #require(configuration("# comment ending in a backslash \\\n[job \"a\"]\nevery = 1s\ncommand = true\n"))
        #expect(config.jobs.count == 1)
        #expect(config.jobs[0].line == 2)
    }

    @Test func crlfIsTolerated() throws {
        let config = try #require(configuration("[daemon]\r\nmax_running = 3\r\n\r\n[job \"a\"]\r\nevery = 2s\r\ncommand = echo a \\\r\n b\r\n"))
        #expect(config.settings.maxRunning == 3)
        #expect(config.jobs[0].spec.action == .shell("echo a   b"))
        #expect(config.jobs[0].line == 4)
    }

    @Test func leadingBOMIsIgnored() throws {
        let bytes: [UInt8] = [0xEF, 0xBB, 0xBF] + Array("[job \"a\"]\nevery = 1s\ncommand = true\n".utf8)
        let config = try ConfigLoader.load(path: mainPath, fileSystem: InMemoryConfigFileSystem(bytes: [mainPath: bytes]))
        #expect(config.jobs.map(\.line) == [1])
    }

    @Test func invalidUTF8IsReportedWithItsLine() {
        let bytes: [UInt8] = Array("[job \"a\"]\nevery = 1s\ncommand = echo ".utf8) + [0xC3, 0x28] + Array("\ncwd = nope\n".utf8)
        let result = ConfigLoader.loadResult(path: mainPath, fileSystem: InMemoryConfigFileSystem(bytes: [mainPath: bytes]))
        #expect(result.diagnostics == [
            at(1, "an action is required: command=STRING, argv=WORDS or webhook=URL"),
            at(3, "invalid UTF-8 (config files must be UTF-8)"),
            at(4, "cwd must be an absolute path, got \"nope\""),
        ])
    }

    @Test func nulByteIsReported() {
        let bytes: [UInt8] = Array("[job \"a\"]\nevery = 1s\ncommand = true\nenv = A=".utf8) + [0] + Array("\n".utf8)
        let result = ConfigLoader.loadResult(path: mainPath, fileSystem: InMemoryConfigFileSystem(bytes: [mainPath: bytes]))
        #expect(result.diagnostics == [at(4, "line contains a NUL byte")])
    }

    @Test func malformedLines() {
        let text = """
            [job "a"
            [job "b"]
            every = 1s
            command = true
            just some words
             = value
            """
        #expect(problems(text) == [
            at(1, "unterminated section header (missing \"]\")"),
            at(5, "expected \"key = value\", a [section] header or a comment, got \"just some words\""),
            at(6, "missing key before \"=\""),
        ])
    }

    @Test func keyBeforeAnySectionIsReportedOnce() {
        #expect(problems("every = 1s\ncommand = true\n[job \"a\"]\nevery = 1s\ncommand = true\n") == [
            at(1, "key \"every\" is outside any section (start with [daemon] or [job \"NAME\"])")
        ])
    }

    @Test func parseFromString() throws {
        let config = try ConfigLoader.parse("[job \"a\"]\nevery = 1s\ncommand = true\n")
        #expect(config.jobs[0].file == "timerd.conf")
        #expect(throws: ConfigErrors([Diagnostic(file: "x.conf", line: 1, message: "unknown section [jobs] (expected [daemon], [cluster], [pool \"NAME\"] or [job \"NAME\"])")])) {
            try ConfigLoader.parse("[jobs]\n", path: "x.conf")
        }
    }
}

extension Result where Failure == ConfigErrors {
    var diagnostics: [String] {
        switch self {
        case .success: return []
        case .failure(let errors): return errors.diagnostics.map(\.description)
        }
    }
}
