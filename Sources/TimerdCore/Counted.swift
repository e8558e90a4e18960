extension Int {
    /// `1 job`, `3 jobs`: the number and its noun, plural unless the number is 1 (`plural` for a noun
    /// that does not take an -s). For the messages of the daemon and `timerctl`.
    package func counted(_ noun: String, plural: String? = nil) -> String {
        "\(self) " + (self == 1 ? noun : plural ?? noun + "s")
    }
}
