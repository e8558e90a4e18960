/// Why a config file could not be read, as the file system reports it (e.g. `No such file or directory`).
public struct ConfigReadError: Error, Equatable, Sendable, CustomStringConvertible {
    /// Human-readable reason, shown after `cannot read:` in diagnostics (typically `strerror(errno)`).
    public var reason: String
    /// True when the file does not exist (lets the daemon treat a missing default config as "no config").
    public var isNotFound: Bool

    public init(reason: String, isNotFound: Bool = false) {
        self.reason = reason
        self.isNotFound = isNotFound
    }

    public var description: String { reason }
}

/// The only way the config loader touches files, so the daemon plugs in the real file system and tests an
/// in-memory one. Paths are passed exactly as the loader built them (absolute when the main path is).
public protocol ConfigFileSystem {
    /// The whole content of the file at `path`.
    func read(_ path: String) throws(ConfigReadError) -> [UInt8]
    /// Existing paths matching the shell-style `pattern` (`*`, `?`, `[…]`, as glob(3) without flags),
    /// sorted; empty when nothing matches. Only called for patterns that contain a wildcard.
    func glob(_ pattern: String) -> [String]
    /// Whether a user (or, with `group`, a group) of that name exists, for `user=`, `group=` and the
    /// `[daemon]` account keys. The default says yes to every name.
    func accountExists(_ name: String, group: Bool) -> Bool
}

extension ConfigFileSystem {
    public func accountExists(_ name: String, group: Bool) -> Bool { true }
}

/// A file system held in memory: for tests, and for checking config text that is not on disk.
public struct InMemoryConfigFileSystem: ConfigFileSystem, Sendable {
    public var files: [String: [UInt8]]
    /// Paths whose read fails with this reason (e.g. `Permission denied`), to exercise error paths.
    public var unreadable: [String: String]
    /// The accounts that exist; nil: every name does.
    public var users: Set<String>?
    public var groups: Set<String>?

    public init(_ files: [String: String] = [:], unreadable: [String: String] = [:]) {
        self.files = files.mapValues { Array($0.utf8) }
        self.unreadable = unreadable
    }

    public init(bytes: [String: [UInt8]], unreadable: [String: String] = [:]) {
        self.files = bytes
        self.unreadable = unreadable
    }

    public func read(_ path: String) throws(ConfigReadError) -> [UInt8] {
        if let reason = unreadable[path] { throw ConfigReadError(reason: reason) }
        guard let bytes = files[path] else { throw ConfigReadError(reason: "No such file or directory", isNotFound: true) }
        return bytes
    }

    public func accountExists(_ name: String, group: Bool) -> Bool {
        (group ? groups : users)?.contains(name) ?? true
    }

    public func glob(_ pattern: String) -> [String] {
        (Array(files.keys) + Array(unreadable.keys)).filter { ConfigGlob.matches(pattern: pattern, path: $0) }.sorted()
    }
}

/// Shell-style pattern matching with glob(3) semantics: per path component, `*` and `?` never match `/`,
/// and a leading `.` must be matched explicitly.
enum ConfigGlob {
    static func hasWildcard(_ pattern: String) -> Bool {
        pattern.contains { $0 == "*" || $0 == "?" || $0 == "[" }
    }

    static func matches(pattern: String, path: String) -> Bool {
        let patternParts = pattern.split(separator: "/", omittingEmptySubsequences: false)
        let pathParts = path.split(separator: "/", omittingEmptySubsequences: false)
        guard patternParts.count == pathParts.count else { return false }
        return zip(patternParts, pathParts).allSatisfy { matchComponent(Array($0.unicodeScalars), Array($1.unicodeScalars)) }
    }

    static func matchComponent(_ pattern: [Unicode.Scalar], _ name: [Unicode.Scalar]) -> Bool {
        if name.first == ".", pattern.first != "." { return false }
        var p = 0, s = 0
        var starP = -1, starS = 0
        while s < name.count {
            if p < pattern.count, let next = step(pattern, p, name[s]) {
                if next < 0 {  // `*`: remember where to backtrack to
                    starP = p
                    starS = s
                    p += 1
                    continue
                }
                p = next
                s += 1
                continue
            }
            guard starP >= 0 else { return false }
            p = starP + 1
            starS += 1
            s = starS
        }
        while p < pattern.count, pattern[p] == "*" { p += 1 }
        return p == pattern.count
    }

    /// Matches one pattern element at `p` against `char`: the index after the element on a match, -1 for
    /// `*`, nil on a mismatch.
    private static func step(_ pattern: [Unicode.Scalar], _ p: Int, _ char: Unicode.Scalar) -> Int? {
        switch pattern[p] {
        case "*": return -1
        case "?": return p + 1
        case "[":
            if let (matched, next) = matchClass(pattern, p, char) { return matched ? next : nil }
            return char == "[" ? p + 1 : nil
        case "\\" where p + 1 < pattern.count:
            return pattern[p + 1] == char ? p + 2 : nil
        default:
            return pattern[p] == char ? p + 1 : nil
        }
    }

    /// `[abc]`, `[a-z]`, `[!x]`/`[^x]`, `[]x]`; nil when the bracket is not closed (then it is a literal `[`).
    private static func matchClass(_ pattern: [Unicode.Scalar], _ open: Int, _ char: Unicode.Scalar) -> (Bool, Int)? {
        var i = open + 1
        var negate = false
        if i < pattern.count, pattern[i] == "!" || pattern[i] == "^" {
            negate = true
            i += 1
        }
        var matched = false
        var first = true
        while i < pattern.count {
            let c = pattern[i]
            if c == "]", !first { return (matched != negate, i + 1) }
            first = false
            if i + 2 < pattern.count, pattern[i + 1] == "-", pattern[i + 2] != "]" {
                if c.value <= char.value && char.value <= pattern[i + 2].value { matched = true }
                i += 3
            } else {
                if c == char { matched = true }
                i += 1
            }
        }
        return nil
    }
}

/// Lexical path helpers. `..` is kept as written (the kernel resolves it through symlinks).
enum ConfigPath {
    /// The directory part of `path`: `""` for a bare name, `/` for a file in the root.
    static func directory(of path: String) -> String {
        guard let slash = path.lastIndex(of: "/") else { return "" }
        return slash == path.startIndex ? "/" : String(path[..<slash])
    }

    /// `path` made relative to `directory` unless it is absolute, then cleaned.
    static func resolve(_ path: String, relativeTo directory: String) -> String {
        if path.hasPrefix("/") || directory.isEmpty { return clean(path) }
        return clean(directory + "/" + path)
    }

    /// Collapses `//` and `/./` and drops a trailing `/`.
    static func clean(_ path: String) -> String {
        let absolute = path.hasPrefix("/")
        let parts = path.split(separator: "/").filter { $0 != "." }
        let joined = parts.joined(separator: "/")
        if absolute { return "/" + joined }
        return joined.isEmpty ? "." : joined
    }
}
