package sandboxes

// Usage is what a team's sandboxes of one template held while they ran:
// seconds running, and their CPU and memory limits over those seconds
// (what a platform bills, as E2B does: per second of what was reserved).
type Usage struct {
	Team, Template   string
	Seconds          float64
	CPUSeconds       float64 // CPUs × seconds
	MemoryGiBSeconds float64 // GiB × seconds
}
