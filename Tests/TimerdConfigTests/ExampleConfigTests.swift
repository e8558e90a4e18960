import Foundation
import Testing
import TimerdConfig
import TimerdCore

@Suite("config/timerd.conf")
struct ExampleConfigTests {
    /// The repository's example config, found from this file: Tests/TimerdConfigTests/ → ../../config.
    static let path: String = {
        var url = URL(fileURLWithPath: #filePath)
        for _ in 0..<3 { url.deleteLastPathComponent() }
        return url.appendingPathComponent("config/timerd.conf").path
    }()

    @Test func theExampleConfigLoadsCleanly() throws {
        let data = try Data(contentsOf: URL(fileURLWithPath: Self.path))
        let fileSystem = InMemoryConfigFileSystem(bytes: [Self.path: Array(data)])
        let config: Configuration
        do {
            config = try ConfigLoader.load(path: Self.path, fileSystem: fileSystem)
        } catch {
            Issue.record("config/timerd.conf does not load:\n\(error)")
            return
        }
        #expect(config.settings.socket == nil, "make run passes --socket; the example must not set one")
        #expect(config.settings.maxRunning >= 1)
        let hello = try #require(config.job(named: JobName("hello")))
        #expect(hello.spec.schedule == .every(interval: .seconds(5), start: nil))
        guard case .shell(let command) = hello.spec.action else {
            Issue.record("hello should be a shell command")
            return
        }
        #expect(command.contains("$TIMERD_RUN"))
        #expect(config.jobs.contains { if case .argv = $0.spec.action { !$0.spec.env.isEmpty && !$0.spec.meta.isEmpty } else { false } })
        // Every visible job fires within a minute, so a new user sees them in the log.
        for job in config.jobs {
            guard case .every(let interval, _) = job.spec.schedule else { continue }
            #expect(interval <= .seconds(60), "\(job.spec.name)")
        }
    }

    @Test func theExamplesInTheDocsLoad() throws {
        var url = URL(fileURLWithPath: Self.path)
        url.deleteLastPathComponent()
        url.deleteLastPathComponent()
        let doc = try String(contentsOf: url.appendingPathComponent("docs/configuration.md"), encoding: .utf8)
        let blocks = doc.components(separatedBy: "```ini\n").dropFirst().map { $0.components(separatedBy: "```")[0] }
        #expect(blocks.count >= 2)
        for block in blocks {
            #expect(throws: Never.self) { try ConfigLoader.parse(block, path: "/etc/timerd/timerd.conf") }
        }
        let first = try ConfigLoader.parse(blocks[0])
        let report = try #require(first.job(named: JobName("report")))
        #expect(report.spec.action == .argv(["/usr/local/bin/report", "--format", "plain text", "--title=Hourly \"ops\" report"]))
    }

    @Test func theCommentedExamplesAreValidToo() throws {
        // Uncommenting every "#[job" / "#key = value" line (not prose comments) must still load.
        let text = try String(contentsOfFile: Self.path, encoding: .utf8)
        let keys = Set(JobSpec.keys + ConfigLoader.daemonKeys)
        var uncommented: [String] = []
        for line in text.split(separator: "\n", omittingEmptySubsequences: false) {
            if line.hasPrefix("#[job ") {
                uncommented.append(String(line.dropFirst()))
            } else if line.hasPrefix("#"), let equals = line.firstIndex(of: "="),
                keys.contains(String(line[line.index(after: line.startIndex)..<equals]).trimmingCharacters(in: .whitespaces)),
                !line.hasPrefix("#include"), !line.hasPrefix("#socket")
            {
                uncommented.append(String(line.dropFirst()))
            } else {
                uncommented.append(String(line))
            }
        }
        // The zones the examples name, from the machine's tz database.
        var zones: [String: [UInt8]] = [:]
        for zone in ["Europe/Berlin", "UTC"] {
            let path = "/usr/share/zoneinfo/" + zone
            zones[path] = [UInt8](try Data(contentsOf: URL(fileURLWithPath: path)))
        }
        let config = try ConfigLoader.parse(uncommented.joined(separator: "\n"), path: Self.path,
                                            fileSystem: InMemoryConfigFileSystem(bytes: zones))
        #expect(config.jobs.count >= 9)
        #expect(config.jobs.contains { if case .cron = $0.spec.schedule { true } else { false } })
        #expect(config.jobs.contains { $0.spec.timezone == "Europe/Berlin" && $0.spec.jitter == .seconds(300) })
        #expect(config.jobs.contains { $0.spec.schedule == .after(delay: .seconds(30)) })
        #expect(config.jobs.contains { if case .at = $0.spec.schedule { true } else { false } })
        #expect(config.jobs.contains { $0.spec.count == 3 })
        #expect(config.jobs.contains { $0.spec.overlap == .queue && $0.spec.cwd == "/tmp" && $0.spec.timeout != nil })
    }
}
