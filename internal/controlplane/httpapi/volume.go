package httpapi

// volumeJSON is E2B's Volume; volumeTokenJSON its VolumeAndToken.
type volumeJSON struct {
	VolumeID string `json:"volumeID"`
	Name     string `json:"name"`
}

type volumeTokenJSON struct {
	volumeJSON
	Token string `json:"token"`
}
