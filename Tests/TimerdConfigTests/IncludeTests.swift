import Testing
import TimerdConfig
import TimerdCore

@Suite("include")
struct IncludeTests {
    let job = "every = 1s\ncommand = true\n"

    @Test func globIsRelativeToTheIncludingFileAndSorted() throws {
        let config = try #require(configuration(
            "[daemon]\ninclude = jobs.d/*.conf\ninclude = /opt/extra/[a-c]?.conf\n[job \"main\"]\n\(job)",
            files: [
                "/etc/timerd/jobs.d/b.conf": "[job \"b\"]\n\(job)",
                "/etc/timerd/jobs.d/a.conf": "# first\n[job \"a1\"]\n\(job)[job \"a2\"]\n\(job)",
                "/etc/timerd/jobs.d/.hidden.conf": "[job \"hidden\"]\n\(job)",
                "/etc/timerd/jobs.d/notes.txt": "not a config file",
                "/etc/timerd/jobs.d/sub/c.conf": "[job \"nested\"]\n\(job)",
                "/opt/extra/b1.conf": "[job \"extra\"]\n\(job)",
                "/opt/extra/d1.conf": "[job \"not-matched\"]\n\(job)",
            ]))
        #expect(config.jobs.map(\.spec.name.rawValue) == ["main", "a1", "a2", "b", "extra"])
        #expect(config.jobs.map(\.location) == [
            "\(mainPath):4", "/etc/timerd/jobs.d/a.conf:2", "/etc/timerd/jobs.d/a.conf:5", "/etc/timerd/jobs.d/b.conf:1",
            "/opt/extra/b1.conf:1",
        ])
        #expect(config.files == [mainPath, "/etc/timerd/jobs.d/a.conf", "/etc/timerd/jobs.d/b.conf", "/opt/extra/b1.conf"])
    }

    @Test func aGlobMatchingNothingIsFine() throws {
        let config = try #require(configuration("[daemon]\ninclude = jobs.d/*.conf\n"))
        #expect(config.jobs.isEmpty)
        #expect(config.files == [mainPath])
    }

    @Test func aMissingLiteralIncludeIsAnError() throws {
        #expect(problems("[daemon]\ninclude = extra.conf\n") == [
            at(2, "include: cannot read /etc/timerd/extra.conf: No such file or directory")
        ])
        let config = try #require(configuration("[daemon]\ninclude = ./extra.conf\n", files: ["/etc/timerd/extra.conf": "[job \"x\"]\n\(job)"]))
        #expect(config.jobs.map(\.file) == ["/etc/timerd/extra.conf"])
    }

    @Test func anUnreadableIncludedFileIsReportedAtTheIncludeLine() {
        #expect(problems("[daemon]\ninclude = jobs.d/*.conf\n", unreadable: ["/etc/timerd/jobs.d/a.conf": "Permission denied"]) == [
            at(2, "include: cannot read /etc/timerd/jobs.d/a.conf: Permission denied")
        ])
    }

    @Test func includingTheMainFileIsACycle() {
        #expect(problems("[daemon]\ninclude = *.conf\n[job \"a\"]\n\(job)") == [
            at(2, "include: /etc/timerd/timerd.conf is the main config file (a file cannot include itself)")
        ])
        #expect(problems("[daemon]\ninclude = ../timerd/timerd.conf\n") == [
            at(2, "include: cannot read /etc/timerd/../timerd/timerd.conf: No such file or directory")
        ])
    }

    @Test func theSameFileIncludedTwiceIsAnError() {
        let files = ["/etc/timerd/jobs.d/a.conf": "[job \"a\"]\n\(job)"]
        #expect(problems("[daemon]\ninclude = jobs.d/*.conf\ninclude = jobs.d/a.conf\n", files: files) == [
            at(3, "include: /etc/timerd/jobs.d/a.conf is already included at line 2")
        ])
    }

    @Test func daemonSectionIsNotAllowedInIncludedFiles() {
        let files = ["/etc/timerd/jobs.d/a.conf": "[daemon]\nmax_running = 2\ninclude = *.conf\n[job \"a\"]\n\(job)"]
        #expect(problems("[daemon]\ninclude = jobs.d/*.conf\n", files: files) == [
            at(1, "[daemon] is allowed only in the main config file (\(mainPath)); included files hold [job] sections",
               file: "/etc/timerd/jobs.d/a.conf")
        ])
    }

    @Test func duplicateJobNamesAcrossFiles() {
        let files = [
            "/etc/timerd/jobs.d/a.conf": "\n[job \"backup\"]\n\(job)",
            "/etc/timerd/jobs.d/b.conf": "[job \"other\"]\n\(job)[job \"backup\"]\n\(job)",
        ]
        #expect(problems("[daemon]\ninclude = jobs.d/*.conf\n[job \"backup\"]\n\(job)", files: files) == [
            at(2, "job \"backup\" is already declared at \(mainPath):3", file: "/etc/timerd/jobs.d/a.conf"),
            at(4, "job \"backup\" is already declared at \(mainPath):3", file: "/etc/timerd/jobs.d/b.conf"),
        ])
    }

    @Test func problemsFromEveryFileAreCollectedInFileOrder() {
        let files = [
            "/etc/timerd/jobs.d/a.conf": "[job \"a\"]\nevery = 1s\ncommand = true\ncount = none\n",
            "/etc/timerd/jobs.d/b.conf": "max_running = 1\n[job \"b\"]\n\(job)",
        ]
        let text = "[daemon]\ninclude = jobs.d/*.conf\ninclude = missing.conf\n[job \"m\"]\nevery = 1x\ncommand = true\n"
        #expect(problems(text, files: files) == [
            at(3, "include: cannot read /etc/timerd/missing.conf: No such file or directory"),
            at(5, "every: invalid duration \"1x\": unknown unit \"x\" (examples: 250ms, 5s, 1m30s, 2h, 1d, 5min)"),
            at(4, "count: expected a whole number of runs ≥ 1, got \"none\"", file: "/etc/timerd/jobs.d/a.conf"),
            at(1, "key \"max_running\" is outside any section (start with [daemon] or [job \"NAME\"])", file: "/etc/timerd/jobs.d/b.conf"),
        ])
    }

    @Test func aMissingMainFileIsOneDiagnosticWithoutALine() throws {
        let result = ConfigLoader.loadResult(path: "/nope/timerd.conf", fileSystem: InMemoryConfigFileSystem())
        #expect(result.diagnostics == ["/nope/timerd.conf: cannot read: No such file or directory"])
        guard case .failure(let errors) = result else { return }
        #expect(errors.diagnostics == [Diagnostic(file: "/nope/timerd.conf", line: 0, message: "cannot read: No such file or directory")])
    }

    @Test func readErrorsSayWhetherTheFileIsMissing() {
        let fileSystem = InMemoryConfigFileSystem(["/a": "x"], unreadable: ["/b": "Permission denied"])
        #expect(throws: ConfigReadError(reason: "No such file or directory", isNotFound: true)) { try fileSystem.read("/c") }
        #expect(throws: ConfigReadError(reason: "Permission denied", isNotFound: false)) { try fileSystem.read("/b") }
    }

    @Test(arguments: [
        ("/d/*.conf", "/d/a.conf", true),
        ("/d/*.conf", "/d/.a.conf", false),
        ("/d/.*.conf", "/d/.a.conf", true),
        ("/d/*.conf", "/d/sub/a.conf", false),
        ("/d/*/a.conf", "/d/sub/a.conf", true),
        ("/d/?.conf", "/d/ab.conf", false),
        ("/d/??.conf", "/d/ab.conf", true),
        ("/d/[a-c].conf", "/d/b.conf", true),
        ("/d/[!a-c].conf", "/d/b.conf", false),
        ("/d/[!a-c].conf", "/d/x.conf", true),
        ("/d/[]x].conf", "/d/].conf", true),
        ("/d/[ab", "/d/[ab", true),
        ("/d/a*b*c", "/d/aXbYbZc", true),
        ("/d/a*b*c", "/d/aXbYbZ", false),
        ("/d/\\*.conf", "/d/*.conf", true),
        ("/d/\\*.conf", "/d/a.conf", false),
    ])
    func globMatching(pattern: String, path: String, expected: Bool) {
        let fileSystem = InMemoryConfigFileSystem([path: ""])
        #expect(fileSystem.glob(pattern) == (expected ? [path] : []))
    }
}
