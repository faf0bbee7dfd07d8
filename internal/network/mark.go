package network

// TenantMark is the firewall mark of the sockets the server opens on a
// tenant's behalf, to addresses a tenant chose (webhooks, image
// registries): every node's firewall refuses such packets to its
// sandboxes, so no address check that missed a sandbox range lets one
// team's request reach another team's sandbox.
const TenantMark = 0x636f7665 // "cove"
