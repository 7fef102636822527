<#
.SYNOPSIS
  winpool agent: brings one Windows node to the revision winpool assigned it,
  then reports on its own Node object (docs/agent.md is the contract).

.DESCRIPTION
  Runs as a HostProcess container (NT AUTHORITY\SYSTEM, host network) from the
  DaemonSet winpool-<pool>-<revision>. Its configuration comes from the pod's
  environment; it writes only annotations on its own Node, using the pod's
  service account token. It is idempotent: run again after a reboot, it finds
  the work done and only reports.

  Environment (set by the operator):
    NODE_NAME                   this node
    WINPOOL_REVISION            revision being applied
    WINPOOL_PATCH_LEVEL         minimum 10.0.<build>.<revision>
    WINPOOL_CONTAINERD_VERSION  containerd version (optional)
    WINPOOL_CNI_MODE            overlay | l2bridge
    WINPOOL_CSI_PROXY_VERSION   CSI Proxy version (optional)
    WINPOOL_UPDATE_SOURCE       folder or share with the cumulative update .msu files (optional; default Windows Update)
#>
$ErrorActionPreference = 'Stop'
Set-StrictMode -Version Latest

$node      = $env:NODE_NAME
$revision  = $env:WINPOOL_REVISION
$target    = [version]$env:WINPOOL_PATCH_LEVEL
$apiServer = "https://$($env:KUBERNETES_SERVICE_HOST):$($env:KUBERNETES_SERVICE_PORT)"
$saDir     = "$env:CONTAINER_SANDBOX_MOUNT_POINT\var\run\secrets\kubernetes.io\serviceaccount"

function Set-NodeAnnotations([hashtable]$annotations) {
  $token = Get-Content "$saDir\token" -Raw
  $body  = @{ metadata = @{ annotations = $annotations } } | ConvertTo-Json -Depth 5
  Invoke-RestMethod -Method Patch -Uri "$apiServer/api/v1/nodes/$node" `
    -Headers @{ Authorization = "Bearer $token" } -ContentType 'application/merge-patch+json' `
    -Body $body -Certificate $null -SkipCertificateCheck:$false | Out-Null
}

function Report([string]$status, [string]$message) {
  $a = @{
    'winpool.dev/applied-revision' = $revision
    'winpool.dev/apply-status'     = $status
    'winpool.dev/apply-message'    = $message
    'winpool.dev/cni-mode'         = $env:WINPOOL_CNI_MODE
  }
  if ($env:WINPOOL_CSI_PROXY_VERSION) { $a['winpool.dev/csi-proxy-version'] = $env:WINPOOL_CSI_PROXY_VERSION }
  # HNS programming as this node sees it: load-balancer policies and remote endpoints.
  try {
    $a['winpool.dev/hns-load-balancers'] = [string]((Get-HnsPolicyList | Measure-Object).Count)
    $a['winpool.dev/hns-endpoints']      = [string]((Get-HnsEndpoint | Where-Object { $_.IsRemoteEndpoint } | Measure-Object).Count)
  } catch { }
  Set-NodeAnnotations $a
}

function Get-PatchLevel {
  $cv = Get-ItemProperty 'HKLM:\SOFTWARE\Microsoft\Windows NT\CurrentVersion'
  [version]"10.0.$($cv.CurrentBuildNumber).$($cv.UBR)"
}

try {
  # 1. Cumulative update: install and reboot; the kubelet reports the new kernelVersion afterwards.
  if ((Get-PatchLevel) -lt $target) {
    if ($env:WINPOOL_UPDATE_SOURCE) {
      Get-ChildItem $env:WINPOOL_UPDATE_SOURCE -Filter *.msu | Sort-Object Name | ForEach-Object {
        Start-Process wusa.exe -ArgumentList "`"$($_.FullName)`" /quiet /norestart" -Wait
      }
    } else {
      Install-Module PSWindowsUpdate -Force -Scope AllUsers | Out-Null
      Install-WindowsUpdate -AcceptAll -IgnoreReboot -Category 'Security Updates', 'Updates' | Out-Null
    }
    if ((Get-PatchLevel) -lt $target) {
      Restart-Computer -Force   # the pod starts again after the reboot and re-checks
      exit 0
    }
  }
  # 2. containerd: replace the binaries from the release archive and restart the service.
  if ($env:WINPOOL_CONTAINERD_VERSION) {
    $have = (& "$env:ProgramFiles\containerd\containerd.exe" --version) -replace '.* v?([0-9.]+).*', '$1'
    if ($have -ne $env:WINPOOL_CONTAINERD_VERSION) {
      & "$PSScriptRoot\install-containerd.ps1" -Version $env:WINPOOL_CONTAINERD_VERSION
    }
  }
  # 3. CNI mode: the HNS network type the CNI config asks for.
  $net = Get-HnsNetwork | Where-Object { $_.Type -in 'Overlay', 'L2Bridge' } | Select-Object -First 1
  if ($net -and $net.Type.ToLower() -ne $env:WINPOOL_CNI_MODE) {
    throw "HNS network is $($net.Type), pool wants $($env:WINPOOL_CNI_MODE): switch the CNI configuration and reboot"
  }
  # 4. CSI Proxy runs as the DaemonSet's second container; nothing to install on the host.
  Report 'Succeeded' "applied revision $revision at $(Get-PatchLevel)"
} catch {
  Report 'Failed' ("{0}" -f $_.Exception.Message)
  exit 1
}
# Stay alive: the DaemonSet keeps one pod per node; the work above is done.
while ($true) { Start-Sleep -Seconds 3600 }
