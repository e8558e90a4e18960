/// What one run by hand adds to its job (`RUN NAME env=K=V … -- ARG …`, `timerctl run NAME --env K=V -- ARG`):
/// environment variables over the job's, and arguments after the job's own (a program job's argv; a
/// `command=` job's shell gets them as `$1`, `$2`, …). Kept with the run in the history.
public struct RunParameters: Sendable, Hashable, Codable {
    enum CodingKeys: String, CodingKey { case env, arguments }

    public var env: [KeyValue]
    public var arguments: [String]

    public init(env: [KeyValue] = [], arguments: [String] = []) {
        self.env = env
        self.arguments = arguments
    }

    public var isEmpty: Bool { env.isEmpty && arguments.isEmpty }

    /// `env=NAME=VALUE` of a run, checked as a job's `env=` is (no `TIMERD_*` names, no NUL).
    public static func environmentPair(_ text: String) throws(TimerdError) -> KeyValue {
        guard !text.utf8.contains(0) else { throw TimerdError(.badArgument, "env: value contains a NUL byte", key: "env") }
        return try JobSpec.parsePair(text, key: "env", namePattern: .environment)
    }

    /// The arguments checked: no NUL byte.
    public static func check(arguments: [String]) throws(TimerdError) {
        guard !arguments.contains(where: { $0.utf8.contains(0) }) else {
            throw TimerdError(.badArgument, "an argument after -- contains a NUL byte")
        }
    }

    /// `{"arguments":[…],"env":["NAME=VALUE",…]}`, as the history keeps them.
    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        env = try c.decode([String].self, forKey: .env).map { pair in
            let parts = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            return KeyValue(String(parts[0]), parts.count > 1 ? String(parts[1]) : "")
        }
        arguments = try c.decode([String].self, forKey: .arguments)
    }

    public func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: CodingKeys.self)
        try c.encode(env.map { "\($0.key)=\($0.value)" }, forKey: .env)
        try c.encode(arguments, forKey: .arguments)
    }

    /// `env=A=1 env=B=2 -- x y`, as the history and the log show them.
    public var description: String {
        (env.map { "env=\($0.key)=\($0.value)" } + (arguments.isEmpty ? [] : ["--"] + arguments)).joined(separator: " ")
    }
}
