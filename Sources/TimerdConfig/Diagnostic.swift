import TimerdCore

/// One problem in a config file, pointing at the line to fix.
public struct Diagnostic: Equatable, Hashable, Sendable, CustomStringConvertible {
    public var file: String
    /// 1-based line number; 0 when the problem is about the file as a whole (e.g. it cannot be read).
    public var line: Int
    public var message: String

    public init(file: String, line: Int, message: String) {
        self.file = file
        self.line = line
        self.message = message
    }

    /// `file:line: message`, or `file: message` when `line` is 0.
    public var description: String { line > 0 ? "\(file):\(line): \(message)" : "\(file): \(message)" }
}

/// Every problem found while loading a configuration (never empty when thrown), in file and line order.
public struct ConfigErrors: Error, Equatable, Sendable, CustomStringConvertible {
    public var diagnostics: [Diagnostic]

    public init(_ diagnostics: [Diagnostic]) { self.diagnostics = diagnostics }

    /// One diagnostic per line, as `timerd --check-config` prints them.
    public var description: String { diagnostics.map(\.description).joined(separator: "\n") }

    /// The `invalid-config` error a RELOAD reply carries: the first problem, and how many more there are.
    public var timerdError: TimerdError {
        let first = diagnostics.first?.description ?? "invalid configuration"
        let more = diagnostics.count > 1 ? " (and \(diagnostics.count - 1) more)" : ""
        return TimerdError(.invalidConfig, first + more)
    }
}
