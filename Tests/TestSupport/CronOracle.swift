import Foundation

/// Python's croniter as an independent oracle of cron's next fire times: `Tests/TimerdCoreTests/cron_oracle.py`,
/// run once for a whole table. The interpreter is `$TIMERD_ORACLE_PYTHON`, or `.build/oracle-venv/bin/python3`
/// under the package root, which `make oracle-deps` creates.
public enum CronOracle {
    /// Why the oracle gave no answer (no interpreter, no croniter, the script failed), with how to set it up.
    public struct Unavailable: Error, CustomStringConvertible {
        public var description: String
    }

    public static let packageRoot = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()

    /// For each case (an expression, local seconds to count from, how many fires), one line: the fire
    /// times as local seconds separated by spaces (`NONE` where croniter finds no more), or
    /// `ERROR <message>`. Returns croniter's version line (`croniter 2.0.1`) and those lines.
    public static func run(_ cases: [(expression: String, base: Int64, count: Int)]) throws -> (version: String, lines: [String]) {
        let python = ProcessInfo.processInfo.environment["TIMERD_ORACLE_PYTHON"].flatMap { $0.isEmpty ? nil : $0 }
            ?? packageRoot.appendingPathComponent(".build/oracle-venv/bin/python3").path
        let setup = "run `make oracle-deps` (it creates .build/oracle-venv with the pinned croniter), "
            + "or point TIMERD_ORACLE_PYTHON at a python3 that has croniter"
        guard FileManager.default.isExecutableFile(atPath: python) else {
            throw Unavailable(description: "the croniter oracle needs Python: no interpreter at \(python); \(setup)")
        }
        let script = packageRoot.appendingPathComponent("Tests/TimerdCoreTests/cron_oracle.py").path
        let directory = FileManager.default.temporaryDirectory
            .appendingPathComponent("timerd-cron-oracle-\(ProcessInfo.processInfo.processIdentifier)-\(UInt64.random(in: 0...UInt64.max))")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let input = directory.appendingPathComponent("cases.tsv")
        let output = directory.appendingPathComponent("out.txt")
        let errors = directory.appendingPathComponent("err.txt")
        let table = cases.map { "\($0.expression)\t\($0.base)\t\($0.count)\n" }.joined()
        try table.write(to: input, atomically: true, encoding: .utf8)
        _ = FileManager.default.createFile(atPath: output.path, contents: nil)
        _ = FileManager.default.createFile(atPath: errors.path, contents: nil)

        let process = Process()
        process.executableURL = URL(fileURLWithPath: python)
        process.arguments = [script, input.path]
        let outHandle = try FileHandle(forWritingTo: output)
        let errHandle = try FileHandle(forWritingTo: errors)
        process.standardOutput = outHandle
        process.standardError = errHandle
        process.standardInput = FileHandle.nullDevice
        try process.run()
        process.waitUntilExit()
        try outHandle.close()
        try errHandle.close()

        let text = try String(contentsOf: output, encoding: .utf8)
        let stderr = try String(contentsOf: errors, encoding: .utf8)
        var lines = text.split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
        if lines.last == "" { lines.removeLast() }
        if process.terminationStatus == 3 || lines.first?.hasPrefix("MISSING") == true {
            throw Unavailable(description: "the croniter oracle needs croniter: \(python) cannot import it; \(setup)\n\(text)\(stderr)")
        }
        guard process.terminationStatus == 0, let first = lines.first, first.hasPrefix("croniter ") else {
            throw Unavailable(description: "cron_oracle.py failed (exit \(process.terminationStatus)):\n\(stderr)\(text.prefix(2_000))")
        }
        return (first, Array(lines.dropFirst()))
    }
}
