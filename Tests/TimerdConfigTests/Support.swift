import Testing
import TimerdConfig
import TimerdCore

let mainPath = "/etc/timerd/timerd.conf"

/// Loads `text` as `/etc/timerd/timerd.conf` next to `files`; the configuration or the diagnostics.
func load(_ text: String, files: [String: String] = [:], unreadable: [String: String] = [:]) -> Result<Configuration, ConfigErrors> {
    var all = files
    all[mainPath] = text
    return ConfigLoader.loadResult(path: mainPath, fileSystem: InMemoryConfigFileSystem(all, unreadable: unreadable))
}

/// The `file:line: message` lines for `text` (empty when it loads).
func problems(_ text: String, files: [String: String] = [:], unreadable: [String: String] = [:]) -> [String] {
    switch load(text, files: files, unreadable: unreadable) {
    case .success: return []
    case .failure(let errors): return errors.diagnostics.map(\.description)
    }
}

/// The configuration for `text`, recording an issue with every diagnostic when it does not load.
func configuration(
    _ text: String, files: [String: String] = [:], sourceLocation: SourceLocation = #_sourceLocation
) -> Configuration? {
    switch load(text, files: files) {
    case .success(let configuration): return configuration
    case .failure(let errors):
        Issue.record("unexpected diagnostics:\n\(errors)", sourceLocation: sourceLocation)
        return nil
    }
}

func spec(_ name: String, _ options: [(String, String)]) throws -> JobSpec {
    try JobSpec(name: JobName(name), options: options.map { KeyValue($0.0, $0.1) }, argv: nil)
}

/// Diagnostics prefix for line `n` of the main file.
func at(_ line: Int, _ message: String, file: String = mainPath) -> String { "\(file):\(line): \(message)" }
