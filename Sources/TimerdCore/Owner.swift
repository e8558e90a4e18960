/// What a job's life is bound to (`owner=`): like a timer whose target holds its owner weakly, the job is
/// cancelled when the owner goes away.
public enum Owner: Equatable, Sendable, CustomStringConvertible {
    /// A process (`owner=pid:N`), watched through a pidfd, so a recycled PID cannot keep the job alive.
    case process(Int32)
    /// The control connection that added the job (`owner=connection`).
    case connection

    public var description: String {
        switch self {
        case .process(let pid): return "pid:\(pid)"
        case .connection: return "connection"
        }
    }

    /// Reads `pid:N` or `connection`.
    public static func parse(_ text: String) throws(TimerdError) -> Owner {
        if text == "connection" { return .connection }
        if text.hasPrefix("pid:"), let pid = Int32(text.dropFirst(4)), pid > 1,
           text.dropFirst(4).utf8.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }) {
            return .process(pid)
        }
        throw TimerdError(.badArgument, "owner: expected pid:N (a process id above 1) or connection, got \"\(text)\"", key: "owner")
    }
}

/// Daemon modes (like run-loop modes): the daemon is in one mode at a time; a job fires only in the modes
/// it lists, and holds its fires otherwise.
public enum Mode {
    /// The mode at start-up, and the one a job runs in unless it says otherwise.
    public static let defaultName = "default"
    /// A job listing `common` runs in every mode.
    public static let commonName = "common"

    /// Reads a comma-separated list of mode names (`modes=common,maintenance`).
    public static func parseList(_ text: String) throws(TimerdError) -> [String] {
        try parseNames(text, key: "modes", what: "mode")
    }

    /// Reads a comma-separated list of names of `validName`'s shape (modes, `run_on=` and `[cluster]`
    /// `tags` tags): spaces and tabs around each trimmed, repeats left out keeping the first order; an
    /// empty item is an invalid `what`.
    public static func parseNames(_ text: String, key: String, what: String) throws(TimerdError) -> [String] {
        var names: [String] = []
        var seen: Set<String> = []  // a 64 KiB request line holds thousands
        for part in text.split(separator: ",", omittingEmptySubsequences: false) {
            let name = try validName(String(part).trimmingSpaces, key: key, what: what)
            if seen.insert(name).inserted { names.append(name) }
        }
        return names
    }

    /// Checks a tag or mode name: `[A-Za-z0-9_.-]{1,64}`, like job names.
    public static func validName(_ text: String, key: String, what: String) throws(TimerdError) -> String {
        do {
            return try JobName(text).rawValue
        } catch {
            throw TimerdError(.badArgument, "\(key): invalid \(what) \"\(text)\": 1 to 64 letters, digits, '_', '.' or '-'", key: key)
        }
    }

    /// Whether a job listing `modes` fires while the daemon is in `current`.
    public static func includes(_ modes: [String], _ current: String) -> Bool {
        modes.contains(current) || modes.contains(commonName)
    }
}

extension String {
    fileprivate var trimmingSpaces: String {
        var scalars = Substring(self).unicodeScalars
        while let first = scalars.first, first == " " || first == "\t" { scalars.removeFirst() }
        while let last = scalars.last, last == " " || last == "\t" { scalars.removeLast() }
        return String(scalars)
    }
}
